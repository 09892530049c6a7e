package main

import (
	"testing"

	"github.com/alecthomas/kong"
)

// TestCompareArgsCarryTheRun: the flags --compare gives both sides'
// end-to-end runs parse back into the run asked for (records, broker,
// batch size, the whole workload mix and its seed), so the two binaries
// settle the same records.
func TestCompareArgsCarryTheRun(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) benchCmd {
		t.Helper()
		var c benchCmd
		k, err := newParser(&c, kong.Exit(func(int) { t.Fatalf("settle-bench %v: exited", args) }))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Parse(args); err != nil {
			t.Fatalf("settle-bench %v: %v", args, err)
		}
		return c
	}
	asked := parse("--records", "5000", "--broker", "inproc", "--batch-size", "500", "--duplicates", "0.1",
		"--conflicts", "0.2", "--corrections", "0.03", "--refunds", "0.04", "--holds", "0.06", "--seed", "7")
	got := parse(asked.compareArgs()...)
	type run struct {
		records, batch                                     int
		broker                                             string
		duplicates, conflicts, corrections, refunds, holds float64
		seed                                               uint64
	}
	of := func(c benchCmd) run {
		return run{c.Records, c.BatchSize, c.Broker, c.Duplicates, c.Conflicts, c.Corrections, c.Refunds, c.Holds, c.Seed}
	}
	if of(got) != of(asked) {
		t.Fatalf("compare args %v give the run %+v, want %+v", asked.compareArgs(), of(got), of(asked))
	}
}
