package schema_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle/settletest"
)

// TestLedgerIDsInWriteOrder: an account's state is its ledger row with the
// highest id (account_states, migration 0016), which holds only while the
// ids are drawn one at a time as rows are written. A sequence cache would
// hand each session a range of its own, and a later writer of an account
// could take lower ids than an earlier one. On both layouts.
func TestLedgerIDsInWriteOrder(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]string{"plain": settletest.NewDatabase(t), "partitioned": settletest.NewPartitionedDatabase(t)} {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		var cache, step int64
		err = conn.QueryRow(ctx, `SELECT seqcache, seqincrement FROM pg_sequence
			WHERE seqrelid = pg_get_serial_sequence('ledger_entries', 'id')::regclass`).Scan(&cache, &step)
		conn.Close(ctx)
		if err != nil || cache != 1 || step <= 0 {
			t.Errorf("%s: ledger id sequence cache %d, increment %d (%v); want a cache of 1, increasing", name, cache, step, err)
		}
	}
}
