package schema_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/settlehq/settle/settle/settletest"
)

// TestLedgerKeyFencesWriters: a ledger row's id is given by its writer,
// the account's newest row's + 1 (migration 0017), and the primary key
// refuses a second row of that id on the account: what stops two writers
// that started from the same state. The column has no default to fall
// back on, and a row of the same id on another account is no conflict.
// On both layouts.
// Seen failing with the identity left on the column.
func TestLedgerKeyFencesWriters(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]string{"plain": settletest.NewDatabase(t), "partitioned": settletest.NewPartitionedDatabase(t)} {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		var identity string
		var hasDefault bool
		if err := conn.QueryRow(ctx, `SELECT attidentity::text, atthasdef FROM pg_attribute
			WHERE attrelid = 'ledger_entries'::regclass AND attname = 'id'`).Scan(&identity, &hasDefault); err != nil {
			t.Fatal(err)
		}
		if identity != "" || hasDefault {
			t.Errorf("%s: ledger_entries.id identity %q, default %v: want neither, the writer gives it", name, identity, hasDefault)
		}
		row := `INSERT INTO ledger_entries (id, identity_id, account_id, tenant_id, bucket, amount) VALUES ($1, 1, $2, 'acme', 'balance', 1)`
		if _, err := conn.Exec(ctx, row, 1, 7); err != nil {
			t.Fatalf("%s: first row: %v", name, err)
		}
		if _, err := conn.Exec(ctx, row, 1, 8); err != nil {
			t.Errorf("%s: the same id on another account: %v", name, err)
		}
		_, err = conn.Exec(ctx, row, 1, 7)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
			t.Errorf("%s: a second row of id 1 on the account: %v; want a unique violation", name, err)
		}
		conn.Close(ctx)
	}
}
