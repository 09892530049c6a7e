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
// the statement: a COMMIT queued after it (pgq.Pipeline.Commit) then never
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

// TestAccountKept: what no primary key fences when a transaction uses
// kept account states is checked before its COMMIT (account_kept.sql,
// settle_kept): each state's newest row is still there, and a state an
// answer used without writing a row is still the newest. Both fail as a
// serialization failure (the transaction retries, reading the accounts
// fresh), counting only the accounts concerned: a newer row fails only the
// states marked newest; a row gone (a database restored under the
// process) fails every state. Seen failing with the comparison of newer
// rows inverted, and with the row look-up on entry_id + 1.
func TestAccountKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := settletest.NewPool(t, 2)
	var ids []int64
	rows, err := pool.Query(ctx, `INSERT INTO accounts (tenant_id, subject, currency)
		VALUES ('acme', 'cust-1', 'USD'), ('acme', 'cust-2', 'USD'), ('acme', 'cust-3', 'USD') RETURNING id`)
	if err == nil {
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		t.Fatal(err)
	}
	const row = `INSERT INTO ledger_entries (id, identity_id, account_id, tenant_id, bucket, amount, seq, balance_after, held_after)
		VALUES ($1::bigint, $1::bigint, $2, 'acme', 'balance', 1, $1::bigint, $1::bigint, 0)`
	for _, id := range ids {
		if _, err := pool.Exec(ctx, row, 1, id); err != nil {
			t.Fatal(err)
		}
	}
	kept := func(newest ...bool) error {
		return db.On(pool).AccountKept(ctx, db.AccountKeptParams{TenantIds: []string{"acme", "acme", "acme"}, Ids: ids,
			EntryIds: []int64{1, 1, 1}, Newest: newest})
	}
	check := func(what string, err error, want string) {
		t.Helper()
		var pgErr *pgconn.PgError
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want the check to pass", what, err)
		case want != "" && (!errors.As(err, &pgErr) || pgErr.Code != "40001" || !strings.Contains(pgErr.Message, want)):
			t.Errorf("%s: %v, want a serialization failure saying %q", what, err, want)
		}
	}
	check("states that are the newest", kept(true, true, true), "")
	if _, err := pool.Exec(ctx, row, 2, ids[1]); err != nil {
		t.Fatal(err)
	}
	check("cust-2 moved, its state not used for an answer", kept(true, false, true), "")
	check("cust-2 moved, its state used for an answer", kept(true, true, true), "settle_kept: 1 of 3 accounts changed")
	check("cust-2 moved, cust-3's state used for an answer", kept(false, false, true), "")
	settletest.Bypass(t, pool, `TRUNCATE ledger_entries, accounts`)
	check("every account gone", kept(false, false, false), "settle_kept: 3 of 3 accounts this process kept are gone")
}
