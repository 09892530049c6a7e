package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/reconcile"
	"github.com/settlehq/settle/settle/settletest"
)

// TestSettledScanPagesByKey: the source check's scan of settle's settled
// identities reads one page's rows per page on a tenant loaded in bulk
// and never analysed (autovacuum off, statistics of an empty table), the
// state month end meets right after a load: EXPLAIN ANALYZE of a page in
// the middle of 40,000 identities reads at most the page (plus the rows of
// other operations it skips), never the tenant's every identity.
func TestSettledScanPagesByKey(t *testing.T) {
	t.Parallel()
	const loaded, page = 40_000, 5000
	pool := bulkLoaded(t, loaded, false)
	args := map[string]any{"tenant_id": "acme", "after_period": "2026-11", "after_record_id": "u-020000", "after_operation": "usage",
		"to_period": "2026-11", "operations": []string{"usage"}, "page_rows": page}
	plan := settletest.ExplainAnalyze(t, pool, "sql/source_settled_scan.sql", args, reconcile.SettledScanPlan)
	if read := settletest.RowsRead(plan, "identities"); read > 2*page {
		b, _ := json.Marshal(plan)
		t.Errorf("one page of %d read %d identity rows (of %d loaded): the scan is not paged by key\n%s", page, read, loaded, b)
	}
}

// TestChainNetLooksUpByKey: the chain check's read of one chunk's net
// charges (5,000 roots named by key) on the same un-analysed bulk load
// reads each root, its members and its ledger rows through their indexes:
// the rows it reads of identities, chains and ledger_entries are bounded
// by the chunk, never the tenant's every row once per chunk.
func TestChainNetLooksUpByKey(t *testing.T) {
	t.Parallel()
	const loaded, chunk = 40_000, 5000
	pool := bulkLoaded(t, loaded, true)
	periods, recs := make([]string, chunk), make([]string, chunk)
	for i := range chunk {
		periods[i], recs[i] = "2026-11", fmt.Sprintf("u-%06d", 20_001+i)
	}
	args := map[string]any{"tenant_id": "acme", "periods": periods, "record_ids": recs, "from_period": "2026-11", "to_period": "2026-11"}
	plan := settletest.ExplainAnalyze(t, pool, "sql/source_chain_net.sql", args, "")
	var rows float64
	if v, ok := plan["Actual Rows"].(float64); ok {
		rows = v
	}
	if int(rows) != chunk {
		t.Errorf("the chunk's %d roots gave %v nets", chunk, rows)
	}
	// Each root: its identity, its chain, its correction, its refund
	// and each one's balance row, some through a bitmap (an index entry
	// and a row): 11 here.
	if read := settletest.RowsRead(plan, "identities", "chains", "ledger_entries"); read > 12*chunk {
		b, _ := json.Marshal(plan)
		t.Errorf("one chunk of %d roots read %d rows of identities, chains and ledger_entries (of %d chains loaded): not looked up by key\n%s",
			chunk, read, loaded, b)
	}
}

// bulkLoaded is a store whose tenant acme has loaded+1 settled usages
// of 2026-11 (u-0, then u-000001 up to loaded), each corrected and
// refunded when corrected is set, with its chain and its balance rows:
// copies of u-0's, made in
// one statement per table with autovacuum off and nothing analysed, the
// state month end meets right after a bulk load.
func bulkLoaded(t *testing.T, loaded int, corrected bool) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	s := settletest.NewStore(t, settle.Config{})
	recs := []map[string]any{settletest.Rec("record_id", "u-0")}
	if corrected {
		recs = append(recs, settletest.Rec("record_id", "u-0", "kind", "correction", "corrects", "u-0", "amount", "30", "finalization_version", 2),
			settletest.Signal("refund", "u-0", "cust-1"))
	}
	settletest.MustSettle(t, s, settletest.Batch(0, 0, recs...))
	pool := s.Pool()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var qs []string
		for _, table := range []string{"identities", "chains", "ledger_entries"} {
			qs = append(qs, fmt.Sprintf(`ALTER TABLE %s SET (autovacuum_enabled = off)`, table))
		}
		qs = append(qs,
			fmt.Sprintf(`CREATE TEMP TABLE g ON COMMIT DROP AS SELECT g FROM generate_series(1, %d) g`, loaded),
			`CREATE TEMP TABLE u0 ON COMMIT DROP AS SELECT id FROM identities WHERE record_id = 'u-0'`,
			`DO $$ BEGIN IF (SELECT count(*) FROM u0 WHERE id < 10) NOT IN (1, 3) THEN RAISE 'u-0 is not 1 or 3 identities with ids below 10'; END IF; END $$`,
			`CREATE TEMP TABLE bulk ON COMMIT DROP AS SELECT i.*, g FROM identities i, g WHERE i.record_id = 'u-0'`,
			`UPDATE bulk SET id = id + 10*g, root_id = root_id + 10*g, target_id = target_id + 10*g, record_id = 'u-' || lpad(g::text, 6, '0'), settlement_id = settlement_id || g, "offset" = "offset" + 10*g`,
			`ALTER TABLE bulk DROP COLUMN g`,
			`INSERT INTO identities SELECT * FROM bulk`,
			`CREATE TEMP TABLE bulk_chains ON COMMIT DROP AS SELECT c.*, g FROM chains c, g WHERE c.root_id IN (SELECT id FROM u0)`,
			`UPDATE bulk_chains SET root_id = root_id + 10*g, refund_id = refund_id + 10*g, reclaim_id = reclaim_id + 10*g`,
			`ALTER TABLE bulk_chains DROP COLUMN g`,
			`INSERT INTO chains SELECT * FROM bulk_chains`,
			`CREATE TEMP TABLE bulk_ledger ON COMMIT DROP AS SELECT e.*, g FROM ledger_entries e, g WHERE e.identity_id IN (SELECT id FROM u0)`,
			`UPDATE bulk_ledger SET id = id + 10*g + (SELECT max(id) FROM ledger_entries), identity_id = identity_id + 10*g`,
			`ALTER TABLE bulk_ledger DROP COLUMN g`,
			`INSERT INTO ledger_entries SELECT * FROM bulk_ledger`,
		)
		for _, q := range qs {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pool
}
