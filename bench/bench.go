package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/settlehq/settle/internal/workload"
)

// Report is everything one bench invocation measured.
type Report struct {
	Started   time.Time          `json:"started"`
	Machine   Machine            `json:"machine"`
	Build     Build              `json:"build"` // what the end-to-end figures are of (the service runs in-process)
	Config    ReportConfig       `json:"config"`
	EndToEnd  *RunResult         `json:"end_to_end,omitempty"`
	HalfRate  *RunResult         `json:"half_rate_latency,omitempty"`
	Core      *RunResult         `json:"core_only,omitempty"`
	PerRecord *RunResult         `json:"per_record_baseline,omitempty"`
	Batched   *RunResult         `json:"batched_baseline,omitempty"`
	Pipeline  *RunResult         `json:"pipeline_baseline,omitempty"`
	Copy      *RunResult         `json:"copy_ceiling,omitempty"`
	Ratios    map[string]float64 `json:"ratios,omitempty"`
	Sweep     []Point            `json:"batch_size_sweep,omitempty"`
	Growth    []Point            `json:"growth,omitempty"`
	// GrowthEmptyAfter is the growth run's first window measured again on
	// an empty database right after its last.
	GrowthEmptyAfter float64      `json:"growth_empty_after_records_per_sec,omitempty"`
	Scale            []ScalePoint `json:"scale,omitempty"`
	Edge             *EdgeResult  `json:"edge,omitempty"`
	Plots            []string     `json:"plots,omitempty"`
	Failures         []string     `json:"failures,omitempty"`
}

// Point is one point of a plotted series.
type Point struct {
	X             float64 `json:"x"`
	RecordsPerSec float64 `json:"records_per_sec"`
}

// ScalePoint is one end-to-end run of the scale grid.
type ScalePoint struct {
	Partitions    int     `json:"partitions"`
	Instances     int     `json:"instances"`
	RecordsPerSec float64 `json:"records_per_sec"`
}

// ReportConfig is the part of Config a reader needs to repeat a run.
type ReportConfig struct {
	Workload   Workload `json:"workload"`
	BatchSize  int      `json:"batch_size"`
	Writers    int      `json:"core_writers"`
	PoolConns  int32    `json:"pool_conns"`
	LanesMax   int      `json:"lanes_max,omitempty"` // 0: the service's default
	BrokerProc bool     `json:"broker_in_child_process"`
	HashParts  int      `json:"hash_partitions"` // per-tenant tables PARTITION BY HASH (tenant_id); 0 = plain
}

// Machine describes where the bench ran.
type Machine struct {
	CPUs       int               `json:"cpus"`
	MemoryMiB  int64             `json:"memory_mib"`
	GoVersion  string            `json:"go"`
	PostgreSQL string            `json:"postgresql"`
	PGSettings map[string]string `json:"postgresql_settings"`
}

// Run runs the benchmark as configured, writes bench.json, bench.md and the
// plots to cfg.OutDir, and returns the report. It returns an error when a
// run failed, including a run whose exactly-once checks failed: the report
// is still written, with the failures.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now().UTC(), Build: thisBuild(), Config: ReportConfig{Workload: cfg.Workload, BatchSize: cfg.BatchSize,
		Writers: cfg.Writers, PoolConns: cfg.PoolConns, LanesMax: cfg.LanesMax, BrokerProc: len(cfg.BrokerArgv) > 0, HashParts: cfg.HashPartitions}}
	var err error
	if rep.Machine, err = describeMachine(ctx, cfg.ServerURL); err != nil {
		return nil, err
	}
	if rep.Machine.PGSettings["autovacuum"] == "off" {
		fmt.Fprintln(cfg.Log, "bench: PostgreSQL runs with autovacuum off: the dead rows of the outbox queue (rows go once "+
			"published) stay, and a run of more than a few seconds measures them; servers in use run it on")
	}
	r := &runner{cfg: &cfg, rep: rep}
	timeout := time.Duration(cfg.Workload.Records/500+120) * time.Second // of an end-to-end run
	if !cfg.Skip.EndToEnd {
		r.endToEnd(ctx, timeout)
	}
	if !cfg.Skip.Latency {
		r.halfRate(ctx, timeout)
	}
	if !cfg.Skip.Scale {
		r.scale(ctx, timeout)
	}
	if !cfg.Skip.Core {
		r.core(ctx)
	}
	if !cfg.Skip.PerRecord {
		w := cfg.Workload
		w.Records = cfg.PerRecordRecords
		res, err := cfg.repeat(func(int) (RunResult, error) { return cfg.runPerRecord(ctx, w, cfg.PerRecordConns) })
		rep.PerRecord = r.keep("per-record", res, err)
	}
	if !cfg.Skip.Batched {
		res, err := cfg.repeat(func(int) (RunResult, error) { return cfg.runBatched(ctx, cfg.Workload) })
		rep.Batched = r.keep("batched", res, err)
	}
	if !cfg.Skip.Pipeline {
		res, err := cfg.repeat(func(int) (RunResult, error) { return cfg.runPipeline(ctx, cfg.Workload) })
		rep.Pipeline = r.keep("pipeline", res, err)
	}
	if !cfg.Skip.Copy {
		res, err := cfg.repeat(func(int) (RunResult, error) { return cfg.runCopy(ctx, cfg.Workload) })
		rep.Copy = r.keep("copy-ceiling", res, err)
	}
	if !cfg.Skip.Sweep {
		r.sweep(ctx)
	}
	if !cfg.Skip.Growth {
		r.growth(ctx)
	}
	if !cfg.Skip.Edge {
		r.edge(ctx)
	}
	rep.Ratios = ratios(rep)
	if err := rep.write(cfg.OutDir); err != nil {
		return rep, err
	}
	if len(rep.Failures) > 0 {
		return rep, errors.New("bench failed: " + fmt.Sprint(rep.Failures))
	}
	return rep, nil
}

// runner runs Run's measurements one after the other into its report; a
// measurement that fails is noted there and the next one runs.
type runner struct {
	cfg *Config
	rep *Report
}

func (r *runner) fail(what string, err error) {
	r.rep.Failures = append(r.rep.Failures, what+": "+err.Error())
	fmt.Fprintf(r.cfg.Log, "bench %s FAILED: %v\n", what, err)
}

// keep reports a run: its failure, or its summary line and the run.
func (r *runner) keep(what string, res RunResult, err error) *RunResult {
	if err != nil {
		r.fail(what, err)
		return nil
	}
	fmt.Fprintf(r.cfg.Log, "bench %-14s %8.0f records/s  service %.3f cpu-s/1k  postgres %.3f cpu-s/1k  host idle %2.0f%%  wal %.0f B/record  checks ok\n",
		res.Name, res.RecordsPerSec, res.ServiceCPUPer1k, res.PGCPUPer1k, 100*res.HostIdleShare, res.WALBytesPerRec)
	return &res
}

// endToEnd drains a pre-loaded workload through the whole pipeline.
func (r *runner) endToEnd(ctx context.Context, timeout time.Duration) {
	cfg := r.cfg
	res, err := cfg.repeat(func(i int) (RunResult, error) {
		w := cfg.Workload
		w.Seed += uint64(10 * i)
		return cfg.runE2E(ctx, e2eRun{name: "end-to-end", w: w, timeout: timeout, tag: fmt.Sprintf("-%d", i)})
	})
	r.rep.EndToEnd = r.keep("end-to-end", res, err)
}

// halfRate measures the latency of a stream produced at half the
// end-to-end rate (or the configured one).
func (r *runner) halfRate(ctx context.Context, timeout time.Duration) {
	cfg := r.cfg
	rate := 5000.0
	switch {
	case cfg.LatencyRate > 0:
		rate = cfg.LatencyRate
	case r.rep.EndToEnd != nil:
		rate = r.rep.EndToEnd.RecordsPerSec / 2
	}
	w := cfg.Workload
	w.Records = max(1000, min(w.Records, int(rate*cfg.LatencySeconds.Seconds())))
	w.Seed++
	res, err := cfg.runE2E(ctx, e2eRun{name: "half-rate", w: w, paced: rate, timeout: timeout})
	r.rep.HalfRate = r.keep("half-rate", res, err)
}

// scale runs the end-to-end grid of partitions by service instances.
func (r *runner) scale(ctx context.Context, timeout time.Duration) {
	cfg := r.cfg
	for _, p := range cfg.ScalePartitions {
		for _, n := range cfg.ScaleInstances {
			w := cfg.Workload
			w.Records, w.Partitions = cfg.ScaleRecords, p
			w.Seed += 3
			name := fmt.Sprintf("scale-p%d-i%d", p, n)
			res, err := cfg.runE2E(ctx, e2eRun{name: name, w: w, timeout: timeout, instances: n})
			if r.keep(name, res, err) != nil {
				r.rep.Scale = append(r.rep.Scale, ScalePoint{Partitions: p, Instances: n, RecordsPerSec: res.RecordsPerSec})
			}
		}
	}
}

// core settles the workload straight into the store, without Kafka.
func (r *runner) core(ctx context.Context) {
	cfg := r.cfg
	res, err := cfg.repeat(func(i int) (RunResult, error) {
		w := cfg.Workload
		w.Seed += uint64(10 * i)
		return cfg.runCore(ctx, coreRun{name: "core-only", w: w, batch: cfg.BatchSize, writers: cfg.Writers})
	})
	r.rep.Core = r.keep("core-only", res, err)
}

// sweep runs the core at each batch size of the sweep.
func (r *runner) sweep(ctx context.Context) {
	cfg := r.cfg
	for _, bs := range cfg.SweepBatches {
		w := cfg.Workload
		w.Records = cfg.SweepRecords
		res, err := cfg.runCore(ctx, coreRun{name: fmt.Sprintf("batch-%d", bs), w: w, batch: bs, writers: cfg.Writers})
		if r.keep(fmt.Sprintf("batch size %d", bs), res, err) != nil {
			r.rep.Sweep = append(r.rep.Sweep, Point{X: float64(bs), RecordsPerSec: res.RecordsPerSec})
		}
	}
}

// growth measures the core's rate window by window as the identities
// grow, then its first window again on an empty database.
func (r *runner) growth(ctx context.Context) {
	cfg, rep := r.cfg, r.rep
	w := cfg.Workload
	// About 69% of the default mix's records are new identities.
	w.Records = int(float64(cfg.GrowthIdentities) / newShare(w.Mix))
	w.Seed += 2
	window := max(1000, w.Records/cfg.GrowthPoints)
	res, err := cfg.runCore(ctx, coreRun{name: "growth", w: w, batch: cfg.BatchSize, writers: cfg.Writers, window: window,
		onWindow: func(ids int64, rate float64) {
			rep.Growth = append(rep.Growth, Point{X: float64(ids), RecordsPerSec: rate})
		}})
	if r.keep("growth", res, err) == nil {
		return
	}
	// The growth run takes long enough for a host's speed to drift (a
	// third within the hour on some): its first window is measured again
	// on an empty database right after the last, so one ratio compares two
	// windows a minute apart.
	w.Records = window
	res, err = cfg.runCore(ctx, coreRun{name: "growth-empty-after", w: w, batch: cfg.BatchSize, writers: cfg.Writers})
	if after := r.keep("growth-empty-after", res, err); after != nil {
		rep.GrowthEmptyAfter = after.RecordsPerSec
	}
}

// edge loads the HTTP edge of a service process.
func (r *runner) edge(ctx context.Context) {
	bin, err := serviceBinary(r.rep.Build.Path, r.cfg.EdgeBinary)
	if err != nil {
		r.fail("edge", err)
		return
	}
	res, err := r.cfg.runEdge(ctx, bin, "")
	if err != nil {
		r.fail("edge", err)
		return
	}
	r.rep.Edge = res
	r.cfg.logEdge(res)
}

// repeat runs one measurement cfg.Repeat times and returns the run with the
// median rate, noting every rate. Any failed run fails the measurement.
func (cfg *Config) repeat(run func(i int) (RunResult, error)) (RunResult, error) {
	var rs []RunResult
	for i := range cfg.Repeat {
		r, err := run(i)
		if err != nil {
			return r, err
		}
		rs = append(rs, r)
	}
	if len(rs) == 1 {
		return rs[0], nil
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].RecordsPerSec < rs[j].RecordsPerSec })
	m := rs[len(rs)/2]
	rates := make([]string, len(rs))
	for i, r := range rs {
		rates[i] = fmt.Sprintf("%.0f", r.RecordsPerSec)
	}
	m.Notes = append(m.Notes, fmt.Sprintf("median of %d runs (records/s: %s)", len(rs), strings.Join(rates, ", ")))
	return m, nil
}

// newShare is the expected share of records that are new identities.
func newShare(m workload.Mix) float64 { return max(0.05, 1-m.Duplicates-m.Conflicts) }

func ratios(r *Report) map[string]float64 {
	out := map[string]float64{}
	put := func(name string, a, b *RunResult) {
		if a != nil && b != nil && b.RecordsPerSec > 0 {
			out[name] = a.RecordsPerSec / b.RecordsPerSec
		}
	}
	put("end_to_end/per_record", r.EndToEnd, r.PerRecord)
	put("end_to_end/copy_ceiling", r.EndToEnd, r.Copy)
	put("core_only/per_record", r.Core, r.PerRecord)
	put("core_only/copy_ceiling", r.Core, r.Copy)
	put("end_to_end/batched", r.EndToEnd, r.Batched)
	put("end_to_end/pipeline", r.EndToEnd, r.Pipeline)
	put("core_only/batched", r.Core, r.Batched)
	put("end_to_end/core_only", r.EndToEnd, r.Core)
	if len(r.Growth) >= 2 {
		out["growth_last/first"] = r.Growth[len(r.Growth)-1].RecordsPerSec / r.Growth[0].RecordsPerSec
		if r.GrowthEmptyAfter > 0 {
			out["growth_last/empty_after"] = r.Growth[len(r.Growth)-1].RecordsPerSec / r.GrowthEmptyAfter
		}
	}
	return out
}

func describeMachine(ctx context.Context, serverURL string) (Machine, error) {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), PGSettings: map[string]string{},
		MemoryMiB: statusMemTotal() >> 10}
	conn, err := connect(ctx, serverURL)
	if err != nil {
		return m, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, `SELECT version()`).Scan(&m.PostgreSQL); err != nil {
		return m, err
	}
	for _, s := range []string{"shared_buffers", "synchronous_commit", "wal_level", "max_wal_size", "checkpoint_timeout", "work_mem", "max_connections", "fsync", "full_page_writes", "wal_compression", "autovacuum"} {
		var v string
		if err := conn.QueryRow(ctx, `SELECT current_setting($1)`, s).Scan(&v); err == nil {
			m.PGSettings[s] = v
		}
	}
	return m, nil
}

func statusMemTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb int64
	if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err != nil {
		return 0 // unknown, as when the file cannot be read
	}
	return kb
}

func (r *Report) write(dir string) error {
	plots, err := r.plot(dir)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	r.Plots = plots
	if err := writeJSON(filepath.Join(dir, "bench.json"), r); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "bench.md"), []byte(r.markdown()), 0o644)
}
