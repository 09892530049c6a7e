package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBench is an executable that stands for another release's `settle
// bench --only e2e`: it writes report to the directory after --out.
func fakeBench(t *testing.T, report string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "report.json"), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nwhile [ $# -gt 0 ]; do if [ \"$1\" = --out ]; then out=$2; fi; shift; done\n" +
		"mkdir -p \"$out\" && cp " + filepath.Join(dir, "report.json") + " \"$out/bench.json\"\n"
	bin := filepath.Join(dir, "settle")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestCompareReadsTheOtherRun: a comparison takes records/s, CPU, WAL and
// peak RSS from the other binary's own report, and refuses a run whose
// exactly-once checks failed or that has none.
func TestCompareReadsTheOtherRun(t *testing.T) {
	t.Parallel()
	c := &Config{ServerURL: "postgres://unused"}
	bin := fakeBench(t, `{"end_to_end": {"records_per_sec": 12000, "service_cpu_s_per_1k": 0.03,
		"postgres_cpu_s_per_1k": 0.06, "wal_bytes_per_record": 2212.5, "peak_rss_bytes": 419430400, "checks": {"violations": []}}}`)
	e, err := c.runE2EOf(context.Background(), []string{bin, "bench"}, filepath.Join(t.TempDir(), "e2e"))
	if err != nil {
		t.Fatal(err)
	}
	if e.RecordsPerSec != 12000 || e.ServiceCPUPer1k != 0.03 || e.PGCPUPer1k != 0.06 || e.WALBytesPerRec != 2212.5 || e.PeakRSSBytes != 400<<20 {
		t.Fatalf("read %+v", *e)
	}
	for report, want := range map[string]string{
		`{"end_to_end": {"records_per_sec": 1, "checks": {"violations": ["2 ledger rows for one identity"]}}}`: "exactly-once checks failed",
		`{"end_to_end": {"records_per_sec": 1}}`: "no end-to-end run with checks",
	} {
		if _, err := c.runE2EOf(context.Background(), []string{fakeBench(t, report)}, filepath.Join(t.TempDir(), "e2e")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("report %s: %v, want an error saying %q", report, err, want)
		}
	}
}

// TestRoundOrderAlternatesWhoGoesFirst: over any even number of rounds,
// each binary runs first in half of them, and each round runs both.
func TestRoundOrderAlternatesWhoGoesFirst(t *testing.T) {
	t.Parallel()
	first := [2]int{}
	for round := range 6 {
		o := roundOrder(round)
		if o[0] == o[1] {
			t.Fatalf("round %d runs side %d twice", round, o[0])
		}
		first[o[0]]++
	}
	if first[0] != 3 || first[1] != 3 {
		t.Errorf("in 6 rounds the new binary went first %d times and the old %d, want 3 and 3", first[0], first[1])
	}
}

// TestCompareSideOfEitherKind: --compare OLD takes a settle release that
// still has `settle bench` (its end-to-end part runs as OLD bench ...,
// its edge part drives OLD itself) and a settle-bench, which has no
// command (its end-to-end part runs as OLD ..., its edge part drives the
// settle beside it, and a missing one is an error that says what to give).
func TestCompareSideOfEitherKind(t *testing.T) {
	t.Parallel()
	script := func(dir, name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	release := script(t.TempDir(), "settle", `[ "$1" = bench ] && exit 0; exit 2`)
	s, err := compareSide(ctx, release, true)
	if err != nil || strings.Join(s.bench, " ") != release+" bench" || s.service != release {
		t.Fatalf("a release with settle bench: %+v, %v", s, err)
	}
	dir := t.TempDir()
	benchProgram := script(dir, "settle-bench", `echo "settle-bench: unexpected argument $1" >&2; exit 2`)
	if _, err := compareSide(ctx, benchProgram, true); err == nil || !strings.Contains(err.Error(), "--edge-binary") {
		t.Fatalf("a settle-bench with no settle beside it, edge part on: %v, want an error naming --edge-binary", err)
	}
	if s, err := compareSide(ctx, benchProgram, false); err != nil || strings.Join(s.bench, " ") != benchProgram || s.service != "" {
		t.Fatalf("a settle-bench, edge part off: %+v, %v", s, err)
	}
	settle := script(dir, "settle", "exit 0")
	if s, err := compareSide(ctx, benchProgram, true); err != nil || strings.Join(s.bench, " ") != benchProgram || s.service != settle {
		t.Fatalf("a settle-bench with settle beside it: %+v, %v", s, err)
	}
}
