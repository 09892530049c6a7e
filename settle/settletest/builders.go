package settletest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
)

// Rec builds a valid usage record with fields overridden by kv pairs
// (a nil value deletes the field).
func Rec(kv ...any) map[string]any {
	m := map[string]any{
		"tenant_id":            "acme",
		"account_period":       "2026-11",
		"record_id":            "u-1",
		"kind":                 "usage",
		"subject":              "cust-1",
		"amount":               "40",
		"currency":             "USD",
		"meter":                "gpu_seconds",
		"quantity":             "40",
		"unit":                 "s",
		"occurred_at":          "2026-11-03T10:00:00Z",
		"finalization_version": 1,
	}
	set(m, kv)
	return m
}

// set overrides the fields of m with kv's name/value pairs; a nil value
// deletes the field.
func set(m map[string]any, kv []any) {
	for i := 0; i+1 < len(kv); i += 2 {
		name, ok := kv[i].(string)
		if !ok {
			panic(fmt.Sprintf("settletest: field name %v is not a string", kv[i]))
		}
		if kv[i+1] == nil {
			delete(m, name)
		} else {
			m[name] = kv[i+1]
		}
	}
}

// Grant builds a grant of amount to subject.
func Grant(id, subject, amount string) map[string]any {
	return Rec("record_id", id, "kind", "grant", "subject", subject, "amount", amount,
		"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)
}

// Batch turns records into inputs on one partition starting at offset.
func Batch(partition int32, offset int64, recs ...map[string]any) []message.Input {
	ins := make([]message.Input, len(recs))
	for i, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			panic(err)
		}
		ins[i] = message.Input{Topic: "usage", Partition: partition, Offset: offset + int64(i), Value: b}
	}
	return ins
}

// Clone copies m with the fields of kv overridden (a nil value deletes
// the field).
func Clone(m map[string]any, kv ...any) map[string]any {
	c := maps.Clone(m)
	set(c, kv)
	return c
}

// MustSettle decodes and settles ins, failing the test on an error.
func MustSettle(t *testing.T, s *settle.Store, ins []message.Input) []message.Result {
	t.Helper()
	rs, err := s.Settle(context.Background(), "g", s.Decode(ins))
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	if len(rs) != len(ins) {
		t.Fatalf("settle returned %d results for %d inputs", len(rs), len(ins))
	}
	return rs
}

// Outcomes lists the results as outcome[:reason].
func Outcomes(rs []message.Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Outcome)
		if r.Reason != "" {
			out[i] += ":" + r.Reason
		}
	}
	return out
}

// CheckInvariants asserts what must hold after any run: every account's
// balance and held (account_states: its newest ledger row's) equal the sums
// of its rows, and no identity has rows from more
// than one settlement.
func CheckInvariants(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	var bad int
	err := pool.QueryRow(ctx, `
		SELECT count(*) FROM account_states a
		 WHERE a.balance <> coalesce((SELECT sum(amount) FROM ledger_entries e WHERE e.account_id = a.id AND bucket = 'balance'), 0)
		    OR a.held <> coalesce((SELECT sum(amount) FROM ledger_entries e WHERE e.account_id = a.id AND bucket = 'held'), 0)
		    OR a.seq <> (SELECT count(DISTINCT identity_id) FROM ledger_entries e WHERE e.account_id = a.id)`).Scan(&bad)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Errorf("%d accounts whose balance, held or seq differ from their rows", bad)
	}
	var orphans int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries e LEFT JOIN identities i ON i.id = e.identity_id WHERE i.outcome IS DISTINCT FROM 'settled'`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d ledger rows without a settled identity", orphans)
	}
}

// Count runs a query that returns one integer.
func Count(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Balance is an account's balance (account_states), or the error in brackets.
func Balance(t *testing.T, pool *pgxpool.Pool, tenant, subject, currency string) string {
	t.Helper()
	var b string
	err := pool.QueryRow(context.Background(), `SELECT balance::text FROM account_states WHERE tenant_id=$1 AND subject=$2 AND currency=$3`, tenant, subject, currency).Scan(&b)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return b
}

// Signal builds a refund, reclaim or hold release of record id (their
// canonical form is the identity alone).
func Signal(kind, id, subject string) map[string]any {
	return Rec("kind", kind, "record_id", id, "subject", subject, "amount", nil, "currency", nil,
		"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)
}

// Usages builds n usage records prefix-0 … over 50 subjects.
func Usages(prefix string, n int) []map[string]any {
	recs := make([]map[string]any, n)
	for i := range recs {
		recs[i] = Rec("record_id", fmt.Sprintf("%s-%d", prefix, i), "subject", fmt.Sprintf("s-%d", i%50))
	}
	return recs
}
