package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

func connect(ctx context.Context, url string) (*pgx.Conn, error) { return pgx.Connect(ctx, url) }

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// markdown renders the report as the table BENCHMARKS.md quotes.
func (r *Report) markdown() string {
	var b strings.Builder
	r.writeSetting(&b)
	r.writeRuns(&b)
	if len(r.Ratios) > 0 {
		b.WriteString("\n| ratio | value |\n|---|---:|\n")
		for _, k := range slices.Sorted(maps.Keys(r.Ratios)) {
			fmt.Fprintf(&b, "| %s | %.2f |\n", k, r.Ratios[k])
		}
	}
	if r.EndToEnd != nil && len(r.EndToEnd.Outcomes) > 0 {
		b.WriteString("\nOutcomes of the end-to-end run: ")
		for _, k := range slices.Sorted(maps.Keys(r.EndToEnd.Outcomes)) {
			fmt.Fprintf(&b, "%s %d; ", k, r.EndToEnd.Outcomes[k])
		}
		b.WriteString("\n")
	}
	if r.HalfRate != nil && r.HalfRate.Latency != nil && len(r.HalfRate.Latency.Stages) > 0 {
		l := r.HalfRate.Latency
		b.WriteString("\n| half-rate latency, input record timestamp to | p50 ms | p99 ms |\n|---|---:|---:|\n")
		for _, s := range l.Stages {
			fmt.Fprintf(&b, "| %s | %.1f | %.1f |\n", s.Stage, s.P50ms, s.P99ms)
		}
		fmt.Fprintf(&b, "| the settlement read from the topic | %.1f | %.1f |\n", l.P50ms, l.P99ms)
	}
	r.writeSeries(&b)
	for _, x := range []*RunResult{r.EndToEnd, r.HalfRate, r.Core, r.PerRecord, r.Batched, r.Pipeline, r.Copy} {
		if x != nil && len(x.Notes) > 0 {
			fmt.Fprintf(&b, "\n%s: %s\n", x.Name, strings.Join(x.Notes, "; "))
		}
	}
	if e := r.Edge; e != nil {
		fmt.Fprintf(&b, "\nEdge (%s, %d clients, requests of one record): %d keys, %d distinct records; answers %v\n",
			e.Binary, e.Clients, e.Keys, e.Records, e.Answers)
	}
	for _, p := range r.Plots {
		fmt.Fprintf(&b, "\n![%s](%s)\n", p, filepath.Base(p))
	}
	if len(r.Failures) > 0 {
		b.WriteString("\n## FAILURES\n\n")
		for _, f := range r.Failures {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	return b.String()
}

// writeSetting writes the title, the machine and the workload.
func (r *Report) writeSetting(b *strings.Builder) {
	w := r.Config.Workload
	fmt.Fprintf(b, "# settle-bench, %s\n\n", r.Started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(b, "Machine: %d CPUs, %d MiB, %s; %s\n\n", r.Machine.CPUs, r.Machine.MemoryMiB, r.Machine.GoVersion, r.Machine.PostgreSQL)
	for _, k := range slices.Sorted(maps.Keys(r.Machine.PGSettings)) {
		fmt.Fprintf(b, "%s=%s ", k, r.Machine.PGSettings[k])
	}
	fmt.Fprintf(b, "\n\nThe service of the end-to-end, latency, scale and core-only runs: in-process in %s. The edge's: the settle run of the binary named under the table.", r.Build)
	fmt.Fprintf(b, "\n\nWorkload: %d records, %d tenants, %d subjects, %d partitions; duplicates %.2f, conflicts %.2f, corrections %.2f, refunds %.2f, holds %.2f; batch %d, core writers %d, pool %d, broker in a child process: %v; per-tenant tables hash-partitioned: %d (0 = plain)\n\n",
		w.Records, w.Tenants, w.Subjects, w.Partitions, w.Mix.Duplicates, w.Mix.Conflicts, w.Mix.Corrections, w.Mix.Refunds, w.Mix.Holds,
		r.Config.BatchSize, r.Config.Writers, r.Config.PoolConns, r.Config.BrokerProc, r.Config.HashParts)
}

// writeRuns writes the table of runs, one row each.
func (r *Report) writeRuns(b *strings.Builder) {
	b.WriteString("| run | records | records/s | latency p50 / p99 / max (ms) | service CPU s / 1k rec | PostgreSQL CPU s / 1k rec | host idle | peak RSS MiB | WAL B / rec | invariants |\n")
	b.WriteString("|---|---:|---:|---|---:|---:|---:|---:|---:|---|\n")
	runs := []*RunResult{r.EndToEnd, r.HalfRate, r.Core, r.PerRecord, r.Batched, r.Pipeline, r.Copy}
	if r.Edge != nil {
		// The edge's rows count requests (one record each), not records.
		runs = append(runs, &r.Edge.Saturation, &r.Edge.HalfRate)
	}
	for _, x := range runs {
		if x == nil {
			continue
		}
		lat, peak, chk := "", "", "n/a (baseline)"
		if x.Latency != nil && x.Latency.Samples > 0 {
			lat = fmt.Sprintf("%.1f / %.1f / %.1f at %.0f/s", x.Latency.P50ms, x.Latency.P99ms, x.Latency.MaxMs, x.Latency.RateRPS)
			if x.Latency.WarmupSamples > 0 {
				lat += fmt.Sprintf(" after a %.0f s warm-up (its p99 %.1f)", x.Latency.WarmupSeconds, x.Latency.WarmupP99ms)
			}
		}
		if x.PeakRSSBytes > 0 {
			peak = fmt.Sprintf("%d", x.PeakRSSBytes>>20)
		}
		if x.Checks != nil {
			chk = "ok"
			if len(x.Checks.Violations) > 0 {
				chk = "**VIOLATED**"
			}
		}
		fmt.Fprintf(b, "| %s | %d | %.0f | %s | %.3f | %.3f | %.0f%% | %s | %.0f | %s |\n", x.Name, x.Records, x.RecordsPerSec, lat,
			x.ServiceCPUPer1k, x.PGCPUPer1k, 100*x.HostIdleShare, peak, x.WALBytesPerRec, chk)
	}
}

// writeSeries writes the tables of the batch-size sweep, the growth run and
// the scale grid.
func (r *Report) writeSeries(b *strings.Builder) {
	if len(r.Sweep) > 0 {
		b.WriteString("\n| batch size (core-only) | records/s |\n|---:|---:|\n")
		for _, p := range r.Sweep {
			fmt.Fprintf(b, "| %.0f | %.0f |\n", p.X, p.RecordsPerSec)
		}
	}
	if len(r.Growth) > 0 {
		b.WriteString("\n| settled identities (core-only) | records/s in the window |\n|---:|---:|\n")
		for _, p := range r.Growth {
			fmt.Fprintf(b, "| %.0f | %.0f |\n", p.X, p.RecordsPerSec)
		}
	}
	if len(r.Scale) > 0 {
		b.WriteString("\n| partitions | service instances | records/s (end-to-end) |\n|---:|---:|---:|\n")
		for _, p := range r.Scale {
			fmt.Fprintf(b, "| %d | %d | %.0f |\n", p.Partitions, p.Instances, p.RecordsPerSec)
		}
	}
}
