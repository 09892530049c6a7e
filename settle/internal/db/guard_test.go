package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/settletest"
)

// TestGuardedUpdatesCheckThemselves: each conditional update of the
// settling transaction (an account at the sequence it was read at, a chain
// or a hold at its revision) fails, in PostgreSQL, when it matches fewer
// rows than it names, and its error names the statement: a COMMIT queued
// after it (db.Pipeline.Commit) then never commits it. Seen failing with
// the settle_guard call taken out of account_update.sql (the update then
// matched nothing and succeeded).
func TestGuardedUpdatesCheckThemselves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := settletest.NewPool(t, 2)
	q := db.On(pool)
	var account int64
	if err := pool.QueryRow(ctx, `INSERT INTO accounts (tenant_id, subject, currency) VALUES ('acme', 'cust-1', 'USD') RETURNING id`).Scan(&account); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"account_update", func() error {
			return q.AccountUpdate(ctx, db.AccountUpdateParams{ID: []int64{account}, BalanceDelta: []string{"1"}, HeldDelta: []string{"0"},
				SeqBefore: []int64{41}, SeqAfter: []int64{42}, ChainHead: [][]byte{{}}})
		}},
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
	var seq int64
	if err := pool.QueryRow(ctx, `SELECT seq FROM accounts WHERE id = $1`, account).Scan(&seq); err != nil || seq != 0 {
		t.Errorf("account seq %d (%v) after a failed guarded update, want 0", seq, err)
	}
}
