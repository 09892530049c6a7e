package pgq_test

import (
	"context"
	"strings"
	"testing"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/settle/settletest"
)

// TestTxFoldsBeginAndCommit: a transaction whose BEGIN travels with its
// first batch runs under the planner settings, in one transaction (what a
// failing statement leaves is rolled back), and a COMMIT queued in its last
// pipeline commits only when every statement before it succeeded. Seen
// failing with the COMMIT's answer unchecked (a rolled-back pipeline then
// read as committed) and with the BEGIN left out of the first batch (its
// statements then ran in an implicit transaction of their own and the
// later rollback kept their rows).
func TestTxFoldsBeginAndCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := settletest.NewPool(t, 2)
	if _, err := pool.Exec(ctx, "CREATE TABLE tx_probe (n int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	begin := func() *pgq.Tx {
		t.Helper()
		tx, err := pgq.Begin(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(ctx) }) // a failed check must not leave the pool waiting for it
		return tx
	}
	count := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM tx_probe").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Committed in the pipeline: its settings were in force.
	tx := begin()
	p := pgq.NewPipeline(tx)
	_, _ = p.Exec(ctx, "INSERT INTO tx_probe VALUES (1)")
	_, _ = p.Exec(ctx, "DO $$ BEGIN IF current_setting('plan_cache_mode') <> 'force_generic_plan' OR current_setting('enable_seqscan') <> 'off' THEN RAISE 'settings not in force'; END IF; END $$")
	p.Commit(tx)
	if err := p.Send(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("after a committed pipeline: %d rows, want 1", n)
	}

	// A statement fails before the COMMIT: nothing of the transaction
	// stays, the first round trip's insert included.
	tx = begin()
	first := pgq.NewPipeline(tx)
	_, _ = first.Exec(ctx, "INSERT INTO tx_probe VALUES (2)")
	if err := first.Send(ctx); err != nil {
		t.Fatal(err)
	}
	failing := pgq.NewPipeline(tx)
	_, _ = failing.Exec(ctx, "INSERT INTO tx_probe VALUES (1)") // a duplicate key
	failing.Commit(tx)
	if err := failing.Send(ctx); err == nil || !strings.Contains(err.Error(), "duplicate key") {
		t.Fatalf("pipeline with a failing statement: %v, want the duplicate key", err)
	}
	tx.Rollback(ctx)
	if n := count(); n != 1 {
		t.Fatalf("after a failed pipeline: %d rows, want 1", n)
	}

	// A COMMIT sent after a failed statement is answered ROLLBACK: the
	// pipeline reports it, and Commit too.
	tx = begin()
	first = pgq.NewPipeline(tx)
	_, _ = first.Exec(ctx, "INSERT INTO tx_probe VALUES (3)")
	if err := first.Send(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO tx_probe VALUES (1)"); err == nil {
		t.Fatal("duplicate insert succeeded")
	}
	last := pgq.NewPipeline(tx)
	last.Commit(tx)
	if err := last.Send(ctx); err == nil || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("a COMMIT after a failed statement: %v, want it read as rolled back", err)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("Commit after a rolled-back pipeline reported success")
	}
	if n := count(); n != 1 {
		t.Fatalf("after a rolled-back COMMIT: %d rows, want 1", n)
	}

	// Commit of a transaction a statement failed in reports it.
	tx = begin()
	if _, err := tx.Exec(ctx, "INSERT INTO tx_probe VALUES (1)"); err == nil {
		t.Fatal("duplicate insert succeeded")
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("commit of a failed transaction reported success")
	}
	tx.Rollback(ctx) // after Commit: does nothing
}
