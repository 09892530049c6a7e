package settle_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/settletest"
)

// TestSmallAndLargeBatchesWriteTheSameRows: the same 120 records, settled
// as one batch (identities and ledger entries written with COPY) and as
// batches of 6 (written in the last pipeline, identity_insert.sql and
// ledger_entry_insert.sql), leave the same identity rows, nulls included,
// and the same ledger rows. Seen failing with the insert's null of
// settlement_id dropped (nullif removed: ” stored for the refused hold).
func TestSmallAndLargeBatchesWriteTheSameRows(t *testing.T) {
	t.Parallel()
	var recs []map[string]any
	for i := range 4 {
		recs = append(recs, settletest.Grant(fmt.Sprintf("g-%d", i), fmt.Sprintf("cust-%d", i), "1000"))
	}
	for i := range 100 {
		r := settletest.Rec("record_id", fmt.Sprintf("u-%d", i), "subject", fmt.Sprintf("cust-%d", i%4), "amount", fmt.Sprint(1+i%7))
		if i%5 == 0 {
			r["attributes"] = map[string]any{"job": fmt.Sprintf("j-%d", i)}
		}
		recs = append(recs, r)
	}
	recs = append(recs,
		settletest.Rec("record_id", "u-1", "subject", "cust-1", "amount", "99"), // a conflict: quarantined
		settletest.Rec("kind", "correction", "record_id", "c-2", "corrects", "u-2", "subject", "cust-2", "amount", "30", "finalization_version", 2),
		settletest.Signal("refund", "u-3", "cust-3"),
		settletest.Signal("reclaim", "u-4", "cust-0"),
		settletest.Rec("kind", "hold", "record_id", "h-1", "subject", "cust-0", "amount", "7", // held
			"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil),
		settletest.Rec("kind", "hold", "record_id", "h-2", "subject", "cust-0", "amount", "999999", // refused: insufficient funds
			"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil),
	)
	for len(recs) < 120 {
		recs = append(recs, settletest.Rec("record_id", fmt.Sprintf("v-%d", len(recs)), "subject", "cust-2", "amount", "1"))
	}

	if !(6 < settle.CopyRowsMin && settle.CopyRowsMin <= len(recs)) {
		t.Fatalf("batches of 6 and one of %d do not fall on both sides of CopyRowsMin %d", len(recs), settle.CopyRowsMin)
	}
	large := settletest.NewStore(t, settle.Config{})
	settletest.MustSettle(t, large, settletest.Batch(0, 0, recs...))
	small := settletest.NewStore(t, settle.Config{})
	for i := 0; i < len(recs); i += 6 {
		settletest.MustSettle(t, small, settletest.Batch(0, int64(i), recs[i:min(i+6, len(recs))]...))
	}

	// Every column but the ids, the clocks and the stored response's
	// commit time, which the two runs cannot share.
	const identities = `SELECT tenant_id, account_period, record_id, operation, fingerprint::text, canonical_version::text,
		encode(canonical, 'hex'), outcome, reason, (response::jsonb - 'committed_at')::text,
		coalesce(settlement_id, '<null>'), coalesce((SELECT subject || '/' || currency FROM accounts a WHERE a.id = i.account_id), '<null>'),
		coalesce((SELECT record_id FROM identities r WHERE r.id = i.root_id), '<null>'),
		coalesce((SELECT record_id FROM identities r WHERE r.id = i.target_id), '<null>'),
		source, coalesce(attributes::text, '<null>'), topic, partition::text, "offset"::text, attempts::text, subject, currency
		FROM identities i ORDER BY record_id, operation`
	const entries = `SELECT i.record_id, i.operation, a.subject, l.bucket, l.amount::text, encode(l.chain_hash, 'hex')
		FROM ledger_entries l JOIN identities i ON i.id = l.identity_id JOIN accounts a ON a.id = l.account_id
		ORDER BY i.record_id, i.operation, l.bucket`
	for _, q := range []string{identities, entries} {
		a, b := rows(t, large, q), rows(t, small, q)
		if len(a) < 100 || !slices.EqualFunc(a, b, slices.Equal) {
			for i := range max(len(a), len(b)) {
				if i >= len(a) || i >= len(b) || !slices.Equal(a[i], b[i]) {
					t.Fatalf("row %d differs (of %d / %d):\n one batch  %v\n batches of 6 %v", i, len(a), len(b), at(a, i), at(b, i))
				}
			}
		}
	}
}

func rows(t *testing.T, s *settle.Store, q string) [][]string {
	t.Helper()
	rs, err := s.Pool().Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out [][]string
	for rs.Next() {
		vs, err := rs.Values()
		if err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(vs))
		for i, v := range vs {
			row[i] = fmt.Sprint(v)
		}
		out = append(out, row)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func at(rs [][]string, i int) []string {
	if i < len(rs) {
		return rs[i]
	}
	return nil
}

// TestOpenRefusesIDSequencesOfAnotherStep: a batch takes its identity and
// outbox ids a block of 1,000 per nextval (db.IDBlock), so a database
// whose sequence steps by less would hand two transactions the same ids.
// Open refuses it and says how to restore the step.
// Seen failing with the check taken out.
func TestOpenRefusesIDSequencesOfAnotherStep(t *testing.T) {
	t.Parallel()
	url := settletest.NewDatabase(t)
	pool := settletest.PoolOn(t, url, 2)
	ctx := context.Background()
	if _, err := settle.Open(ctx, pool, settle.Config{}); err != nil {
		t.Fatalf("open a migrated database: %v", err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE public.outbox ALTER COLUMN id SET INCREMENT BY 1`); err != nil {
		t.Fatal(err)
	}
	_, err := settle.Open(ctx, pool, settle.Config{})
	if err == nil || !strings.Contains(err.Error(), "INCREMENT BY 1000") {
		t.Fatalf("open with the outbox's sequence stepping by 1: %v, want a refusal that says how to restore it", err)
	}
}
