package bench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"time"
)

// Config configures one `settle-bench` invocation. The zero value of every
// field but ServerURL is a documented default.
type Config struct {
	// ServerURL is an admin URL of the PostgreSQL server; every run creates
	// its own database there (and drops it unless Keep).
	ServerURL string
	Keep      bool
	// HashPartitions > 0: every run's database has its per-tenant tables
	// PARTITION BY HASH (tenant_id) in this many partitions
	// (schema.Partition), the key rules of a database distributed by tenant.
	HashPartitions int

	Workload Workload // Records 0 = 1,000,000; Tenants 0 = 10; Subjects 0 = 10,000; Partitions 0 = 6

	BatchSize int   // records per Settle call; 0 = 1,000
	Writers   int   // core-only concurrent writers; 0 = 4
	PoolConns int32 // service pool connections; 0 = 16
	LanesMax  int   // the service's consumer.Config.LanesMax; 0 = the service's default

	// BrokerArgv, when set, starts the Kafka-protocol broker as this child
	// process (`settle-bench --broker-only`), so the service's memory is
	// measured without the broker's copy of every record. Empty: in-process.
	BrokerArgv []string

	// Which parts to run. Zero Config runs everything.
	Skip struct {
		EndToEnd, Latency, Core, PerRecord, Batched, Pipeline, Copy, Sweep, Growth, Scale, Edge bool
	}

	// The edge run: a `settle run` process (EdgeBinary; "" = the settle
	// beside this executable) driven over HTTP by EdgeClients clients (0 = 64), for
	// EdgeDuration at saturation and as long again at half that rate
	// (0 = 10s each).
	EdgeBinary   string
	EdgeClients  int
	EdgeDuration time.Duration

	// CompareBinary, when set, runs the selected parts with this build and
	// with that binary alternately, CompareRounds pairs (0 = 3), and
	// reports the medians and their ratios (Compare).
	CompareBinary string
	CompareRounds int
	// CompareArgs are the bench flags the e2e part of a comparison passes
	// to each side's own bench (settle-bench, or `settle bench` before it).
	CompareArgs []string

	PerRecordRecords int           // records of the per-record baseline; 0 = min(Records, 100,000)
	PerRecordConns   int           // its connections; 0 = 16
	LatencySeconds   time.Duration //nolint:staticcheck // ST1011 (renaming changes the API). Length of the half-rate latency run; 0 = 15s
	LatencyRate      float64       // records/s of the latency run; 0 = half the end-to-end rate (5,000 without one)
	LatencyWarmup    time.Duration // first part of the latency run left out of its figures (reported apart)
	SweepRecords     int           // records per batch-size point; 0 = min(Records, 100,000)
	SweepBatches     []int         // 0 = 50, 100, 250, 500, 1000, 2000
	GrowthIdentities int           // settled identities the growth run reaches; 0 = 1,000,000
	GrowthPoints     int           // windows of the growth run; 0 = 10
	Repeat           int           // runs of end-to-end, core-only and the baselines; the median is reported; 0 = 1
	ScaleRecords     int           // records per end-to-end run of the scale grid; 0 = min(Records, 100,000)
	ScalePartitions  []int         // partitions of the scale grid; empty = 3, 6, 12, 24
	ScaleInstances   []int         // service instances of the scale grid; empty = 1, 2, 3

	OutDir string    // where report and plots go; "" = "."
	Log    io.Writer // progress lines; nil = discard
}

// latencySecondsDefault is the latency run's length when none is given.
const latencySecondsDefault = 15 * time.Second

func (c *Config) setDefaults() {
	w := &c.Workload
	w.Records = cmp.Or(w.Records, 1_000_000)
	w.Tenants = cmp.Or(w.Tenants, 10)
	w.Subjects = cmp.Or(w.Subjects, 10_000)
	w.Partitions = cmp.Or(w.Partitions, 6)
	w.Period = cmp.Or(w.Period, "2026-07")
	w.Seed = cmp.Or(w.Seed, 1)
	w.Source = cmp.Or(w.Source, "bench")
	c.BatchSize = cmp.Or(c.BatchSize, 1000)
	c.Writers = cmp.Or(c.Writers, 4)
	c.PoolConns = cmp.Or(c.PoolConns, 16)
	c.PerRecordRecords = cmp.Or(c.PerRecordRecords, min(w.Records, 100_000))
	c.PerRecordConns = cmp.Or(c.PerRecordConns, 16)
	c.Repeat = cmp.Or(c.Repeat, 1)
	c.ScaleRecords = cmp.Or(c.ScaleRecords, min(w.Records, 100_000))
	if len(c.ScalePartitions) == 0 {
		c.ScalePartitions = []int{3, 6, 12, 24}
	}
	if len(c.ScaleInstances) == 0 {
		c.ScaleInstances = []int{1, 2, 3}
	}
	c.LatencySeconds = cmp.Or(c.LatencySeconds, latencySecondsDefault)
	c.SweepRecords = cmp.Or(c.SweepRecords, min(w.Records, 100_000))
	if len(c.SweepBatches) == 0 {
		c.SweepBatches = []int{50, 100, 250, 500, 1000, 2000}
	}
	c.GrowthIdentities = cmp.Or(c.GrowthIdentities, 1_000_000)
	c.GrowthPoints = cmp.Or(c.GrowthPoints, 10)
	c.EdgeClients = cmp.Or(c.EdgeClients, 64)
	c.EdgeDuration = cmp.Or(c.EdgeDuration, 10*time.Second)
	c.CompareRounds = cmp.Or(c.CompareRounds, 3)
	c.OutDir = cmp.Or(c.OutDir, ".")
	c.Log = cmp.Or(c.Log, io.Discard)
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	w := c.Workload
	m := w.Mix
	latencyRun := cmp.Or(c.LatencySeconds, latencySecondsDefault) // Validate may run before setDefaults
	switch {
	case c.ServerURL == "":
		return errors.New("bench: no server URL: give --database-url")
	case w.Records < 0 || w.Tenants < 0 || w.Subjects < 0 || w.Partitions < 0:
		return errors.New("bench: records, tenants, subjects and partitions must be positive")
	case w.Subjects != 0 && w.Tenants > w.Subjects:
		return fmt.Errorf("bench: %d tenants need at least as many subjects (have %d)", w.Tenants, w.Subjects)
	case m.Duplicates < 0 || m.Conflicts < 0 || m.Corrections < 0 || m.Refunds < 0 || m.Holds < 0:
		return errors.New("bench: shares must be between 0 and 1")
	case m.Duplicates+m.Conflicts >= 1, m.Corrections+m.Refunds+m.Holds >= 1:
		return errors.New("bench: shares add up to 1 or more: leave room for usage")
	case c.Repeat < 0 || c.Repeat > 9:
		return fmt.Errorf("bench: repeat %d must be between 1 and 9", c.Repeat)
	case c.LatencyWarmup < 0 || c.LatencyWarmup >= latencyRun:
		return fmt.Errorf("bench: latency warm-up %s must be shorter than the latency run (--latency-duration %s)", c.LatencyWarmup, latencyRun)
	case c.LatencyRate < 0:
		return fmt.Errorf("bench: latency rate %.0f must be positive (0 = half the end-to-end rate)", c.LatencyRate)
	case c.EdgeClients < 0 || c.EdgeClients > 1024:
		return fmt.Errorf("bench: edge clients %d must be between 1 and 1024", c.EdgeClients)
	case c.EdgeDuration < 0:
		return errors.New("bench: edge duration must be positive")
	case c.CompareRounds < 0 || c.CompareRounds > 9:
		return fmt.Errorf("bench: compare rounds %d must be between 1 and 9", c.CompareRounds)
	case c.BatchSize < 0 || c.BatchSize > 100_000:
		return fmt.Errorf("bench: batch size %d must be between 1 and 100000", c.BatchSize)
	}
	if err := w.Config.Validate(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for _, b := range c.SweepBatches {
		if b < 1 || b > 100_000 {
			return fmt.Errorf("bench: sweep batch size %d must be between 1 and 100000", b)
		}
	}
	for _, p := range c.ScalePartitions {
		if p < 1 || p > 256 {
			return fmt.Errorf("bench: scale partitions %d must be between 1 and 256", p)
		}
	}
	for _, n := range c.ScaleInstances {
		if n < 1 || n > 8 {
			return fmt.Errorf("bench: scale instances %d must be between 1 and 8 (each has its own connection pool)", n)
		}
	}
	return nil
}
