package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/settletest"
)

// TestGuardedUpdatesCheckThemselves: each conditional update of the
// settling transaction (a chain or a hold at its revision) fails, in
// PostgreSQL, when it matches fewer rows than it names, and its error names
// the statement: a COMMIT queued after it (db.Pipeline.Commit) then never
// commits it. Seen failing with the settle_guard call taken out of
// chain_update.sql (the update then matched nothing and succeeded).
func TestGuardedUpdatesCheckThemselves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := settletest.NewPool(t, 2)
	q := db.On(pool)
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"chain_update", func() error {
			return q.ChainUpdate(ctx, db.ChainUpdateParams{RootID: []int64{7}, NetCharge: []string{"1"}, Version: []int64{1}, RefundID: []int64{0},
				Refunded: []string{""}, ReclaimID: []int64{0}, Recovered: []bool{false}, Rev: []int32{0}})
		}},
		{"hold_update", func() error {
			return q.HoldUpdate(ctx, db.HoldUpdateParams{IdentityID: []int64{7}, Remaining: []string{"0"}, Status: []string{"released"},
				ClosedBy: []int64{0}, Rev: []int32{0}})
		}},
	} {
		err := c.run()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || !strings.Contains(pgErr.Message, c.name+": guarded update matched 0 of 1 rows") {
			t.Errorf("%s naming a row it cannot match: %v, want its guard to fail", c.name, err)
		}
	}
}

// TestAccountRowsNeedTheirLocks: an account's state is its newest ledger
// row, so the one thing that keeps two writers from appending beside each
// other is the account's lock (account_lock.sql). The settling
// transaction's check (account_locks_held.sql) fails when another
// transaction holds the lock of an account it writes, naming the
// statement, and passes when the locks are its own. Seen failing with the
// lock's key in settle_locked off by one (the other's lock then went
// unseen).
func TestAccountRowsNeedTheirLocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := settletest.NewPool(t, 2)
	var ids []int64
	rows, err := pool.Query(ctx, `INSERT INTO accounts (tenant_id, subject, currency)
		VALUES ('acme', 'cust-1', 'USD'), ('acme', 'cust-2', 'USD') RETURNING id`)
	if err == nil {
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		t.Fatal(err)
	}
	const lock = `SELECT pg_advisory_xact_lock(2 + ($1::bigint >> 31)::int, ($1::bigint & 2147483647)::int)`
	writer := func() pgx.Tx {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}
	other := writer()
	if _, err := other.Exec(ctx, lock, ids[0]); err != nil {
		t.Fatal(err)
	}
	tx := writer()
	err = db.On(tx).AccountLocksHeld(ctx, ids)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.Contains(pgErr.Message, "account_lock: 1 of the 2 accounts this transaction writes are locked by another") {
		t.Errorf("writing two accounts while another transaction holds one's lock: %v, want the check to fail", err)
	}
	_ = tx.Rollback(ctx)
	_ = other.Rollback(ctx)

	tx = writer()
	defer func() { _ = tx.Rollback(ctx) }()
	for _, id := range ids {
		if _, err := tx.Exec(ctx, lock, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.On(tx).AccountLocksHeld(ctx, ids); err != nil {
		t.Errorf("writing two accounts holding both locks: %v, want it to pass", err)
	}
}
