package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

func (c *Config) logEdge(r *EdgeResult) {
	s, h := r.Saturation, r.HalfRate
	fmt.Fprintf(c.Log, "bench edge %-8s %8.0f requests/s (%d clients, p99 %.1f ms)  half rate %.0f/s p50 %.1f p99 %.1f ms  service %.3f cpu-s/1k  postgres %.3f cpu-s/1k  host idle %.0f%%  checks ok\n",
		filepath.Base(r.Binary), s.RecordsPerSec, r.Clients, s.Latency.P99ms, h.Latency.RateRPS, h.Latency.P50ms, h.Latency.P99ms,
		s.ServiceCPUPer1k, s.PGCPUPer1k, 100*s.HostIdleShare)
}

// Comparison is a `settle-bench --compare` run: each selected part run
// with this build (New) and the other binary (Old) alternately, the
// medians of each metric and their ratios, new over old. New and Old run
// the end-to-end part (the service in-process in them); NewEdge and
// OldEdge are the settle binaries the edge part drives.
type Comparison struct {
	New     string                  `json:"new"`
	Old     string                  `json:"old"`
	NewEdge string                  `json:"new_edge,omitempty"`
	OldEdge string                  `json:"old_edge,omitempty"`
	Rounds  int                     `json:"rounds"`
	Samples map[string][2][]float64 `json:"samples"` // metric -> new runs, old runs, in run order
	Medians map[string][2]float64   `json:"medians"`
	Ratios  map[string]float64      `json:"ratios"` // new / old
}

// Compare runs the selected parts (edge and e2e) with this executable and
// with cfg.CompareBinary alternately, A B A B ..., cfg.CompareRounds
// pairs, so that a host whose speed drifts (a shared one) weighs on both
// alike; every run ends with its exactly-once checks, and a failed check
// fails the comparison. It writes compare.json and compare.md to
// cfg.OutDir and prints the ratios to cfg.Log.
func Compare(ctx context.Context, cfg Config) (*Comparison, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if cfg.CompareBinary == "" {
		return nil, errors.New("bench: compare needs the other binary")
	}
	self := thisBuild()
	sides := [2]side{{bench: []string{self.Path}}}
	if !cfg.Skip.Edge {
		var err error
		if sides[0].service, err = serviceBinary(self.Path, cfg.EdgeBinary); err != nil {
			return nil, err
		}
	}
	var err error
	if sides[1], err = compareSide(ctx, cfg.CompareBinary, !cfg.Skip.Edge); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, err
	}
	cmp := &Comparison{New: self.String(), Old: cfg.CompareBinary, NewEdge: sides[0].service, OldEdge: sides[1].service,
		Rounds: cfg.CompareRounds, Samples: map[string][2][]float64{}}
	add := func(metric string, side int, v float64) {
		s := cmp.Samples[metric]
		s[side] = append(s[side], v)
		cmp.Samples[metric] = s
	}
	for round := range cfg.CompareRounds {
		for _, side := range roundOrder(round) {
			sd := sides[side]
			tag := fmt.Sprintf("-%s-%d", []string{"new", "old"}[side], round)
			if !cfg.Skip.Edge {
				r, err := cfg.runEdge(ctx, sd.service, tag)
				if err != nil {
					return cmp, fmt.Errorf("edge run of %s (round %d): %w", sd.service, round+1, err)
				}
				cfg.logEdge(r)
				add("edge_requests_per_sec", side, r.Saturation.RecordsPerSec)
				add("edge_half_rate_p99_ms", side, r.HalfRate.Latency.P99ms)
				add("edge_saturation_p99_ms", side, r.Saturation.Latency.P99ms)
				add("edge_service_cpu_s_per_1k", side, r.Saturation.ServiceCPUPer1k)
				add("edge_postgres_cpu_s_per_1k", side, r.Saturation.PGCPUPer1k)
				add("edge_host_idle_share", side, r.Saturation.HostIdleShare)
			}
			if !cfg.Skip.EndToEnd {
				e, err := cfg.runE2EOf(ctx, sd.bench, filepath.Join(cfg.OutDir, "e2e"+tag))
				if err != nil {
					return cmp, fmt.Errorf("e2e run of %s (round %d): %w", sd.bench[0], round+1, err)
				}
				fmt.Fprintf(cfg.Log, "bench e2e %-8s %8.0f records/s  checks ok\n", filepath.Base(sd.bench[0]), e.RecordsPerSec)
				add("e2e_records_per_sec", side, e.RecordsPerSec)
				add("e2e_service_cpu_s_per_1k", side, e.ServiceCPUPer1k)
				add("e2e_postgres_cpu_s_per_1k", side, e.PGCPUPer1k)
				add("e2e_wal_bytes_per_record", side, e.WALBytesPerRec)
				add("e2e_peak_rss_mib", side, float64(e.PeakRSSBytes)/(1<<20))
			}
		}
	}
	cmp.Medians, cmp.Ratios = map[string][2]float64{}, map[string]float64{}
	for m, s := range cmp.Samples {
		md := [2]float64{median(s[0]), median(s[1])}
		cmp.Medians[m] = md
		if md[1] > 0 {
			cmp.Ratios[m] = md[0] / md[1]
		}
	}
	fmt.Fprint(cfg.Log, cmp.markdown())
	if err := writeJSON(filepath.Join(cfg.OutDir, "compare.json"), cmp); err != nil {
		return cmp, err
	}
	return cmp, os.WriteFile(filepath.Join(cfg.OutDir, "compare.md"), []byte(cmp.markdown()), 0o644)
}

// roundOrder is the order the two sides (0 new, 1 old) run in a round: each
// goes first in every other round, so that what favours or handicaps a
// round's first run (a database or page cache still settling from the run
// before) falls on both sides alike, as does a drift over the whole run.
func roundOrder(round int) [2]int {
	if round%2 == 1 {
		return [2]int{1, 0}
	}
	return [2]int{0, 1}
}

// runE2EOf runs a bench program's `--only e2e` (argv: a settle-bench, or
// `settle bench` of a release before it) with cfg.CompareArgs and returns
// the end-to-end run of its bench.json (every release since c4af162 writes
// records/s, CPU, WAL and peak RSS there). That bench fails, and so this
// run, when its exactly-once checks fail.
func (c *Config) runE2EOf(ctx context.Context, argv []string, out string) (*RunResult, error) {
	binary := argv[0]
	args := append(append(argv[1:len(argv):len(argv)], "--only", "e2e", "--database-url", c.ServerURL, "--out", out), c.CompareArgs...)
	cmd := exec.CommandContext(ctx, binary, args...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", binary, strings.Join(args, " "), err, tail(b, 2000))
	}
	raw, err := os.ReadFile(filepath.Join(out, "bench.json"))
	if err != nil {
		return nil, err
	}
	var rep struct {
		EndToEnd *RunResult `json:"end_to_end"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(out, "bench.json"), err)
	}
	switch e := rep.EndToEnd; {
	case e == nil || e.Checks == nil:
		return nil, fmt.Errorf("%s bench wrote no end-to-end run with checks", binary)
	case len(e.Checks.Violations) > 0:
		return nil, fmt.Errorf("%s bench: exactly-once checks failed: %v", binary, e.Checks.Violations)
	}
	return rep.EndToEnd, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (c *Comparison) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nnew: %s\nold: %s\n", c.New, c.Old)
	if c.NewEdge != "" {
		fmt.Fprintf(&b, "edge: the settle run of %s (new) and %s (old)\n", c.NewEdge, c.OldEdge)
	}
	fmt.Fprintf(&b, "%d rounds, each binary first in every other one (new, old; old, new; ...); medians:\n\n", c.Rounds)
	b.WriteString("| metric | new | old | new / old | runs (new; old) |\n|---|---:|---:|---:|---|\n")
	metrics := make([]string, 0, len(c.Medians))
	for m := range c.Medians {
		metrics = append(metrics, m)
	}
	sort.Strings(metrics)
	for _, m := range metrics {
		md, s := c.Medians[m], c.Samples[m]
		fmt.Fprintf(&b, "| %s | %.3g | %.3g | %.2f | %s; %s |\n", m, md[0], md[1], c.Ratios[m], floats(s[0]), floats(s[1]))
	}
	return b.String()
}

func floats(xs []float64) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.4g", x)
	}
	return strings.Join(out, ", ")
}
