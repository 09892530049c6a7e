package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/settlehq/settle/internal/proctest"
	"github.com/settlehq/settle/internal/workload"
	"github.com/settlehq/settle/settle/settletest"
)

// TestTinyBench runs every part of the bench but the edge (TestEdgeBench)
// on 3,000 records (the per-record baseline on 300) and asserts
// the exactly-once checks passed and the report and plots were written. It
// asserts nothing about speed.
// The bare-pipeline baseline fails unless it claimed exactly the workload's
// new identities (seen failing with one lane's records counted and never
// written).
func TestTinyBench(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	cfg := Config{
		ServerURL: settletest.ServerURL(),
		Workload: Workload{Records: 3000, Config: workload.Config{Tenants: 3, Subjects: 200, Partitions: 3,
			Mix: workload.Mix{Duplicates: 0.30, Conflicts: 0.01, Corrections: 0.05, Refunds: 0.05, Holds: 0.05}}},
		Writers: 2, PoolConns: 8, PerRecordConns: 4, PerRecordRecords: 300,
		// A fixed rate: at half a fast host's end-to-end rate the paced run's
		// records all went out inside the warm-up, leaving no sample after it.
		LatencySeconds: 2 * time.Second, LatencyRate: 1500, LatencyWarmup: 500 * time.Millisecond, SweepBatches: []int{250, 1000}, SweepRecords: 1000,
		GrowthIdentities: 1500, GrowthPoints: 2, OutDir: out,
	}
	cfg.Skip.Edge = true
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	// About a minute alone on two cores; beside the other packages of
	// go test ./... it once took over two. The deadline only keeps a hung
	// run from using up the whole go test -timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*RunResult{rep.EndToEnd, rep.HalfRate, rep.Core} {
		if r == nil || r.Checks == nil || len(r.Checks.Violations) > 0 {
			t.Fatalf("run without passing checks: %+v", r)
		}
	}
	if c := rep.EndToEnd.Checks; c.Topic == nil || c.Topic.DistinctSettlementIDs != c.SettledEffects || c.SettledEffects == 0 {
		t.Fatalf("end-to-end topic check: %+v", c)
	}
	if len(rep.Growth) == 0 || rep.GrowthEmptyAfter == 0 {
		t.Fatalf("growth run without its windows or its empty-database window after: %v, %v", rep.Growth, rep.GrowthEmptyAfter)
	}
	if rep.Batched == nil || rep.Ratios["end_to_end/batched"] == 0 {
		t.Fatalf("batched baseline missing: %+v, ratios %v", rep.Batched, rep.Ratios)
	}
	if rep.Pipeline == nil || rep.Ratios["end_to_end/pipeline"] == 0 {
		t.Fatalf("pipeline baseline missing: %+v, ratios %v", rep.Pipeline, rep.Ratios)
	}
	if rep.EndToEnd.Outcomes["duplicate"] == 0 || rep.EndToEnd.Outcomes["quarantined/fingerprint_mismatch"] == 0 {
		t.Fatalf("workload lacks duplicates or conflicts: %v", rep.EndToEnd.Outcomes)
	}
	if l := rep.HalfRate.Latency; l == nil || l.Samples == 0 || l.WarmupSamples == 0 || len(l.Stages) != 2 {
		t.Fatalf("latency: want samples after and during the warm-up and two stages, got %+v", l)
	}
	for _, f := range []string{"bench.json", "bench.md", "bench-batch-size.png", "bench-latency.png", "bench-growth.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s not written: %v", f, err)
		}
	}
}

// TestEdgeBench runs the edge part against the built binary's `settle
// run` (8 clients, one second at saturation and one at half rate) and
// asserts its rates, that its workload held replays and duplicate records,
// and that its exactly-once checks passed. It asserts nothing about speed.
// Seen failing against a service that answered other bytes than it stored.
func TestEdgeBench(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	cfg := Config{ServerURL: settletest.ServerURL(), OutDir: out,
		EdgeBinary: proctest.Binary(t), EdgeClients: 8, EdgeDuration: time.Second}
	s := &cfg.Skip
	s.EndToEnd, s.Latency, s.Core, s.PerRecord, s.Batched, s.Pipeline, s.Copy, s.Sweep, s.Growth, s.Scale = true, true, true, true, true, true, true, true, true, true
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := rep.Edge
	if e == nil || e.HalfRate.Checks == nil || len(e.HalfRate.Checks.Violations) > 0 || e.Saturation.RecordsPerSec == 0 ||
		e.HalfRate.Latency == nil || e.HalfRate.Latency.Samples == 0 {
		t.Fatalf("edge run without its rates or its passing checks: %+v", e)
	}
	if e.Answers["200 replayed"] == 0 || e.Records >= e.Keys || e.HalfRate.Checks.Deliveries != int64(e.Keys) {
		t.Fatalf("edge workload without replays or duplicate records, or deliveries not one per key: %+v, checks %+v", e, e.HalfRate.Checks)
	}
}

// TestLatencyWarmupShorterThanTheRun: a warm-up that covers the whole
// latency run (given, or its 15 s default) would leave nothing to measure.
func TestLatencyWarmupShorterThanTheRun(t *testing.T) {
	base := Config{ServerURL: "postgres://x", Workload: Workload{Records: 10, Config: workload.Config{Tenants: 1, Subjects: 1, Partitions: 1}}}
	for _, tc := range []struct {
		run, warmup time.Duration
		ok          bool
	}{{0, 3 * time.Second, true}, {0, 20 * time.Second, false}, {10 * time.Second, 10 * time.Second, false}, {10 * time.Second, -time.Second, false}} {
		c := base
		c.LatencySeconds, c.LatencyWarmup = tc.run, tc.warmup
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("run %s, warm-up %s: Validate = %v, want ok %v", tc.run, tc.warmup, err, tc.ok)
		}
	}
}

// TestHostCPU: /proc/stat's first line reads as idle and total ticks, and
// 300 ms of one core spinning (30 ticks of 10 ms) are counted busy, not
// idle. Fails with user time counted idle (0 busy ticks of 60).
func TestHostCPU(t *testing.T) {
	idle0, total0 := hostCPU()
	if total0 == 0 || idle0 > total0 {
		t.Fatalf("hostCPU = %d idle of %d; want a total and idle within it", idle0, total0)
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	idle1, total1 := hostCPU()
	if busy := (total1 - total0) - (idle1 - idle0); busy < 20 {
		t.Fatalf("after 300 ms of one core spinning: %d busy ticks of %d; want at least 20", busy, total1-total0)
	}
}
