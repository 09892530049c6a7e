package settletest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ExplainAnalyze is EXPLAIN ANALYZE's plan of the query in file with
// args, sent as sqlc sends it (each sqlc.arg(name) a positional
// parameter, numbered in order of first use), in a read-only
// repeatable-read transaction, after setup when it is not empty.
func ExplainAnalyze(t testing.TB, pool *pgxpool.Pool, file string, args map[string]any, setup string) map[string]any {
	t.Helper()
	ctx := context.Background()
	sqlText, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	query := regexp.MustCompile(`sqlc\.arg\((\w+)\)`).ReplaceAllStringFunc(string(sqlText), func(m string) string {
		name := m[len("sqlc.arg(") : len(m)-1]
		if n[name] == 0 {
			n[name] = len(n) + 1
		}
		return fmt.Sprintf("$%d", n[name])
	})
	params := make([]any, len(n))
	for name, i := range n {
		v, ok := args[name]
		if !ok {
			t.Fatalf("%s: no value for %s", file, name)
		}
		params[i-1] = v
	}
	var plan []struct{ Plan map[string]any }
	err = pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if setup != "" {
			if _, err := tx.Exec(ctx, setup); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+query, params...).Scan(&plan)
	})
	if err != nil {
		t.Fatalf("explain %s: %v", file, err)
	}
	return plan[0].Plan
}

// RowsRead sums, over a plan's scans of the tables and of their indexes
// (a bitmap index scan names no table: its index is named after it), the
// rows each returned and the rows its filter removed, times the scan's
// loops: what the query read of them.
func RowsRead(node map[string]any, tables ...string) int {
	total := 0
	rel, _ := node["Relation Name"].(string)
	if index, _ := node["Index Name"].(string); rel == "" && index != "" {
		for _, table := range tables {
			if strings.HasPrefix(index, table+"_") {
				rel = table
			}
		}
	}
	if slices.Contains(tables, rel) {
		loops := 1.0
		if v, ok := node["Actual Loops"].(float64); ok && v > 0 {
			loops = v
		}
		for _, k := range []string{"Actual Rows", "Rows Removed by Filter", "Rows Removed by Index Recheck"} {
			if v, ok := node[k].(float64); ok {
				total += int(v * loops)
			}
		}
	}
	if kids, ok := node["Plans"].([]any); ok {
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				total += RowsRead(m, tables...)
			}
		}
	}
	return total
}
