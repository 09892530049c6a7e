package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"

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
	ctx := context.Background()
	s := settletest.NewStore(t, settle.Config{})
	settletest.MustSettle(t, s, settletest.Batch(0, 0, settletest.Rec("record_id", "u-0")))
	pool := s.Pool()
	const loaded, page = 40_000, 5000
	// Copies of the settled usage, each its own identity, in one statement.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, q := range []string{
			`ALTER TABLE identities SET (autovacuum_enabled = off)`,
			fmt.Sprintf(`CREATE TEMP TABLE bulk ON COMMIT DROP AS SELECT i.*, g FROM identities i, generate_series(1, %d) g WHERE i.record_id = 'u-0'`, loaded),
			`UPDATE bulk SET id = id + g, record_id = 'u-' || lpad(g::text, 6, '0'), settlement_id = settlement_id || g, "offset" = "offset" + g`,
			`ALTER TABLE bulk DROP COLUMN g`,
			`INSERT INTO identities SELECT * FROM bulk`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sqlText, err := os.ReadFile("sql/source_settled_scan.sql")
	if err != nil {
		t.Fatal(err)
	}
	// The query as sqlc sends it: each sqlc.arg(name) a positional
	// parameter, numbered in order of first use.
	n := map[string]int{}
	query := regexp.MustCompile(`sqlc\.arg\((\w+)\)`).ReplaceAllStringFunc(string(sqlText), func(m string) string {
		name := m[len("sqlc.arg(") : len(m)-1]
		if n[name] == 0 {
			n[name] = len(n) + 1
		}
		return fmt.Sprintf("$%d", n[name])
	})
	args := map[string]any{"tenant_id": "acme", "after_period": "2026-11", "after_record_id": "u-020000", "after_operation": "usage",
		"to_period": "2026-11", "operations": []string{"usage"}, "page_rows": page}
	params := make([]any, len(n))
	for name, i := range n {
		params[i-1] = args[name]
	}
	var plan []struct{ Plan map[string]any }
	err = pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, reconcile.SettledScanPlan); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+query, params...).Scan(&plan)
	})
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	read := rowsRead(plan[0].Plan)
	b, _ := json.Marshal(plan)
	if read > 2*page {
		t.Errorf("one page of %d read %d identity rows (of %d loaded): the scan is not paged by key\n%s", page, read, loaded, b)
	}
}

// rowsRead sums, over a plan's scans of identities, the rows each
// returned and the rows its filter removed: what the page read.
func rowsRead(node map[string]any) int {
	total := 0
	if rel, _ := node["Relation Name"].(string); rel == "identities" {
		for _, k := range []string{"Actual Rows", "Rows Removed by Filter", "Rows Removed by Index Recheck"} {
			if v, ok := node[k].(float64); ok {
				total += int(v)
			}
		}
	}
	if kids, ok := node["Plans"].([]any); ok {
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				total += rowsRead(m)
			}
		}
	}
	return total
}
