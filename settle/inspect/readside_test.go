package inspect_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/settletest"
)

// TestReadSideCannotWrite: the month-end reads run under settle_reader in
// a READ ONLY transaction; a write there fails, and the role alone could
// not write either.
func TestReadSideCannotWrite(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	ctx := context.Background()
	var user string
	err := inspect.ReadOnlyTx(inspect.New(s), ctx, "test", func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT current_user`).Scan(&user); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO periods (tenant_id, account_period) VALUES ('acme', '2026-11')`)
		return err
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25006" {
		t.Errorf("a write in the read path: %v, want read_only_sql_transaction (25006)", err)
	}
	if user != inspect.ReaderRole {
		t.Errorf("the read path runs as %q, want %s", user, inspect.ReaderRole)
	}
	// The role by itself, in a read-write transaction: no privilege.
	err = pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+inspect.ReaderRole); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO periods (tenant_id, account_period) VALUES ('acme', '2026-11')`)
		return err
	})
	if !errors.As(err, &pe) || pe.Code != "42501" {
		t.Errorf("a write as %s: %v, want insufficient_privilege (42501)", inspect.ReaderRole, err)
	}
	if n := settletest.Count(t, s.Pool(), `SELECT count(*) FROM periods`); n != 0 {
		t.Errorf("%d periods written", n)
	}
}
