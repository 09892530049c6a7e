// Command settle-bench is settle's benchmark: workload, end-to-end and
// core-only runs, the baselines, the exactly-once checks, the report and
// its plots (package bench). It is a program of its own so that the service
// binary, cmd/settle, links none of it (plots, the workload generator).
//
// The end-to-end, latency, scale and core-only figures are of the service's
// packages as built into this binary, run in-process (the report names the
// binary, its commit and its profile-guided build); the edge figures are of
// a settle binary's `settle run`, driven over HTTP (--edge-binary).
// default.pgo here is the same profile as cmd/settle's (a link to it), so
// the service's packages are built alike in both binaries.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/settlehq/settle/bench"
	"github.com/settlehq/settle/internal/cpuprofile"
	"github.com/settlehq/settle/internal/workload"
	"github.com/settlehq/settle/service"
)

// Exit codes, as settle's (CONTRACT.md section 6).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args and runs the benchmark, returning the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c benchCmd
	exited, exitCode := false, 0
	parser, err := newParser(&c, kong.Writers(stdout, stderr), kong.Exit(func(code int) { exited, exitCode = true, code }))
	if err != nil {
		fmt.Fprintf(stderr, "settle-bench: %v\n", err)
		return exitFailure
	}
	_, err = parser.Parse(args)
	if exited { // --help
		if exitCode != 0 {
			return exitUsage
		}
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "settle-bench: %v; see settle-bench --help\n", err)
		return exitUsage
	}
	service.TuneGC(c.MemoryLimitMiB)
	err = c.run(ctx, stdout, stderr)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "settle-bench: %v\n", err)
	if errors.As(err, new(usageError)) {
		return exitUsage
	}
	return exitFailure
}

// newParser is settle-bench's command line.
func newParser(c *benchCmd, opts ...kong.Option) (*kong.Kong, error) {
	return kong.New(c, append([]kong.Option{
		kong.Name("settle-bench"),
		kong.Description("Measure settle's throughput and latency (BENCHMARKS.md): every run on a fresh database, each ending with the exactly-once checks."),
		kong.UsageOnError(),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	}, opts...)...)
}

// usageError is a mistake in how the bench was called: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// benchCmd is the benchmark: workload, end-to-end and core-only runs, the
// baselines, the exactly-once checks, the report and its plots.
type benchCmd struct {
	DatabaseURL string `name:"database-url" env:"SETTLE_BENCH_DATABASE_URL" default:"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable" help:"PostgreSQL server (an admin URL): every run creates its own database there and drops it afterwards."`
	Keep        bool   `name:"keep" hidden:"" help:"Keep the runs' databases instead of dropping them."`
	HashParts   int    `name:"hash-partitions" hidden:"" help:"Partition every per-tenant table by hash of tenant_id into N partitions (0 = plain tables), as settle migrate --hash-partitions."`

	Records     int     `name:"records" default:"1000000" help:"Input records of the main runs, repeats included."`
	Tenants     int     `name:"tenants" hidden:"" default:"10" help:"Tenants."`
	Subjects    int     `name:"subjects" hidden:"" default:"10000" help:"Subjects (accounts)."`
	Partitions  int     `name:"partitions" hidden:"" default:"6" help:"Partitions of the usage topic."`
	BatchSize   int     `name:"batch-size" default:"1000" help:"Records per settling transaction."`
	Writers     int     `name:"writers" hidden:"" default:"4" help:"Concurrent writers of the core-only runs."`
	PoolConns   int32   `name:"pool-max-conns" hidden:"" default:"16" help:"Connections of the end-to-end service."`
	LanesMax    int     `name:"lanes-max" hidden:"" default:"0" help:"The end-to-end service's settle run --lanes-max (0 = its default)."`
	Duplicates  float64 `name:"duplicates" hidden:"" default:"0.30" help:"Share of exact repeats."`
	Conflicts   float64 `name:"conflicts" hidden:"" default:"0.01" help:"Share of repeats with another payload (quarantined)."`
	Corrections float64 `name:"corrections" hidden:"" default:"0.05" help:"Share of corrections."`
	Refunds     float64 `name:"refunds" hidden:"" default:"0.05" help:"Share of refunds."`
	Holds       float64 `name:"holds" hidden:"" default:"0.05" help:"Share of holds."`
	Seed        uint64  `name:"seed" hidden:"" default:"1" help:"Workload seed."`

	Broker           string        `name:"broker" hidden:"" default:"auto" enum:"auto,process,inproc" help:"Where the broker runs: process (a child 'settle-bench --broker-only', so the service's memory is its own), inproc, or auto (process above 100,000 records)."`
	PerRecordRecords int           `name:"per-record-records" hidden:"" default:"100000" help:"Records of the per-record baseline (it is slow)."`
	LatencyDuration  time.Duration `name:"latency-duration" default:"15s" help:"Length of the half-rate latency run."`
	LatencyRate      float64       `name:"latency-rate" hidden:"" help:"Records/s offered in the latency run instead of half the end-to-end rate (5000 when end-to-end is not run)."`
	LatencyWarmup    time.Duration `name:"latency-warmup" hidden:"" default:"3s" help:"First part of the latency run (empty database, cold caches) left out of its percentiles; its own p99 is reported apart. Part of --latency-duration."`
	SweepRecords     int           `name:"sweep-records" hidden:"" default:"100000" help:"Records per point of the batch-size sweep."`
	SweepBatches     []int         `name:"sweep-batches" hidden:"" default:"50,100,250,500,1000,2000" sep:"," help:"Batch sizes of the sweep."`
	GrowthIdentities int           `name:"growth-identities" default:"1000000" help:"Identities the growth run settles (10000000 for the growth figure of BENCHMARKS.md; takes long)."`
	Repeat           int           `name:"repeat" default:"1" help:"Runs of end-to-end, core-only and the baselines; the median run is reported (BENCHMARKS.md reports medians of 3)."`
	ScaleRecords     int           `name:"scale-records" hidden:"" default:"100000" help:"Records per end-to-end run of the scale grid (partitions x service instances)."`
	ScalePartitions  []int         `name:"scale-partitions" hidden:"" default:"3,6,12,24" sep:"," help:"Partitions of the scale grid."`
	ScaleInstances   []int         `name:"scale-instances" hidden:"" default:"1,2,3" sep:"," help:"Service instances (one consumer group; each its own pool, consumer and relay) of the scale grid."`
	Only             []string      `name:"only" sep:"," enum:"e2e,latency,core,per-record,batched,pipeline,copy,sweep,growth,scale,edge" help:"Run only these parts (default: all): e2e,latency,core,per-record,batched,pipeline,copy,sweep,growth,scale,edge."`
	EdgeBinary       string        `name:"edge-binary" help:"The settle binary whose 'settle run' the edge part drives over HTTP (default: the settle beside this program)."`
	EdgeClients      int           `name:"edge-clients" hidden:"" default:"64" help:"Concurrent HTTP clients of the edge part."`
	EdgeDuration     time.Duration `name:"edge-duration" hidden:"" default:"10s" help:"Length of the edge part's saturation run, and of its half-rate run."`
	Compare          string        `name:"compare" placeholder:"OLD_BINARY" help:"Run the selected parts (edge and e2e; default both) with this build and OLD_BINARY (a settle-bench, or a settle release that has 'settle bench') alternately (--compare-rounds pairs) and print the medians and their ratios."`
	CompareRounds    int           `name:"compare-rounds" hidden:"" default:"3" help:"Alternating pairs of runs of --compare."`
	Out              string        `name:"out" default:"bench-out" help:"Directory for bench.json, bench.md and the PNG plots."`

	CPUProfile string `name:"cpuprofile" hidden:"" help:"Write a CPU profile (pprof) of the whole bench to this file."`

	BrokerOnly bool `name:"broker-only" hidden:"" help:"Serve the Kafka-protocol broker until stdin closes (the bench's child process)."`

	MemoryLimitMiB int64 `name:"memory-limit-mib" env:"SETTLE_MEMORY_LIMIT_MIB" default:"384" hidden:"" help:"Soft memory limit of the process in MiB, as settle's: the service runs in-process here under the garbage collector settings it runs with. 0 = Go's defaults."`
}

// run runs the benchmark.
func (c *benchCmd) run(ctx context.Context, stdout, stderr io.Writer) (err error) {
	if c.BrokerOnly {
		return bench.ServeBroker(ctx, os.Stdin, stdout)
	}
	cfg := bench.Config{
		ServerURL: c.DatabaseURL, Keep: c.Keep, HashPartitions: c.HashParts,
		Workload: bench.Workload{Records: c.Records, Config: workload.Config{Tenants: c.Tenants, Subjects: c.Subjects, Partitions: c.Partitions, Seed: c.Seed,
			Mix: workload.Mix{Duplicates: c.Duplicates, Conflicts: c.Conflicts, Corrections: c.Corrections, Refunds: c.Refunds, Holds: c.Holds}}},
		BatchSize: c.BatchSize, Writers: c.Writers, PoolConns: c.PoolConns, LanesMax: c.LanesMax,
		PerRecordRecords: min(c.PerRecordRecords, c.Records), LatencySeconds: c.LatencyDuration, LatencyRate: c.LatencyRate, LatencyWarmup: c.LatencyWarmup,
		SweepRecords: min(c.SweepRecords, c.Records), SweepBatches: c.SweepBatches, GrowthIdentities: c.GrowthIdentities,
		Repeat: c.Repeat, ScaleRecords: min(c.ScaleRecords, c.Records), ScalePartitions: c.ScalePartitions, ScaleInstances: c.ScaleInstances,
		EdgeBinary: c.EdgeBinary, EdgeClients: c.EdgeClients, EdgeDuration: c.EdgeDuration,
		CompareBinary: c.Compare, CompareRounds: c.CompareRounds,
		CompareArgs: c.compareArgs(),
		OutDir:      c.Out, Log: stderr,
	}
	if c.Broker == "process" || (c.Broker == "auto" && c.Records > 100_000) {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find own executable for the broker process: %w", err)
		}
		cfg.BrokerArgv = []string{exe, "--broker-only", "--partitions", strconv.Itoa(c.Partitions)}
	}
	if len(c.Only) > 0 {
		on := map[string]bool{}
		for _, o := range c.Only {
			on[o] = true
		}
		s := &cfg.Skip
		s.EndToEnd, s.Latency, s.Core, s.PerRecord = !on["e2e"], !on["latency"], !on["core"], !on["per-record"]
		s.Batched, s.Copy, s.Sweep, s.Growth, s.Scale = !on["batched"], !on["copy"], !on["sweep"], !on["growth"], !on["scale"]
		s.Edge, s.Pipeline = !on["edge"], !on["pipeline"]
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	stopProfile, err := cpuprofile.Start(c.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile(&err)
	if c.Compare != "" {
		if len(c.Only) == 0 {
			cfg.Skip.Edge, cfg.Skip.EndToEnd = false, false
		}
		if cfg.Skip.Edge && cfg.Skip.EndToEnd {
			return usageError{"--compare runs the edge and e2e parts: give --only edge, --only e2e or both"}
		}
		_, err := bench.Compare(ctx, cfg)
		if err == nil {
			fmt.Fprintf(stdout, "report: %s/compare.md, %s/compare.json\n", c.Out, c.Out)
		}
		return err
	}
	rep, err := bench.Run(ctx, cfg)
	if rep != nil {
		fmt.Fprintf(stdout, "report: %s/bench.md, %s/bench.json, plots %v\n", c.Out, c.Out, rep.Plots)
	}
	return err
}

// compareArgs are the flags both sides of a comparison get for their
// end-to-end runs: the same records, broker, batch size and workload mix.
// Every settle-bench takes them, and `settle bench` of every release since
// c4af162 before it.
func (c *benchCmd) compareArgs() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return []string{"--records", strconv.Itoa(c.Records), "--broker", c.Broker, "--batch-size", strconv.Itoa(c.BatchSize),
		"--duplicates", f(c.Duplicates), "--conflicts", f(c.Conflicts), "--corrections", f(c.Corrections),
		"--refunds", f(c.Refunds), "--holds", f(c.Holds), "--seed", strconv.FormatUint(c.Seed, 10)}
}
