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
// transaction's check (account_locks_held.sql) fails when the transaction
// does not hold the lock of an account it writes, naming the statement,
// and passes when it does. Seen failing with the lock's key in
// settle_locked off by one (the check then found no lock held).
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
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	q := db.On(tx)
	lock := func(id int64) {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(2 + ($1::bigint >> 31)::int, ($1::bigint & 2147483647)::int)`, id); err != nil {
			t.Fatal(err)
		}
	}
	check := func() error {
		if _, err := tx.Exec(ctx, "SAVEPOINT s"); err != nil {
			t.Fatal(err)
		}
		err := q.AccountLocksHeld(ctx, ids)
		if _, rerr := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT s"); rerr != nil {
			t.Fatal(rerr)
		}
		return err
	}
	lock(ids[0])
	err = check()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.Contains(pgErr.Message, "account_lock: this transaction holds the locks of 1 of the 2 accounts it writes") {
		t.Errorf("writing two accounts holding one's lock: %v, want the check to fail", err)
	}
	lock(ids[1])
	if err := check(); err != nil {
		t.Errorf("writing two accounts holding both locks: %v, want it to pass", err)
	}
}
