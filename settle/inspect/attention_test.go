package inspect_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/settletest"
)

// TestSubjectAttentionReadsItsSubject: the account page's open cases and
// waiting records of one subject are found by an index on the subject,
// not by reading every open case and waiting record of the tenant: with
// 100,000 cases (8,000 open for the tenant) and 20,000 waiting records
// (2,000 for the tenant), each query reads a handful of rows, and the page
// lists exactly the subject's case and record. Seen failing before
// migration 25: the case query read 20,000 rows of conflict_cases (the
// tenant's open cases through a bitmap: each index entry and its row),
// the waiting query 4,000 of waiting.
func TestSubjectAttentionReadsItsSubject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := settletest.NewStore(t, settle.Config{})
	pool := s.Pool()
	insertCases(t, pool, 100_000)
	if _, err := pool.Exec(ctx, `
		INSERT INTO waiting (tenant_id, account_period, record_id, operation, target_period, target_record_id,
		                     fingerprint, canonical, value, topic, partition, "offset", response)
		SELECT 't' || (g % 10), '2026-11', 'w-' || g, 'correction', '2026-11', 'r-' || g, g,
		       convert_to('{"currency":"USD","subject":"s-' || g || '"}', 'UTF8'), '\x7b7d', 'usage', 0, g, '{}'
		  FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	// Bytes that are no canonical form (not UTF-8, a NUL, not JSON, a
	// \u0000) have no subject: the index takes them, the insert does not
	// fail (seen failing with the function a plain cast).
	for i, bad := range [][]byte{{0xff}, {0}, []byte("nope"), []byte(`{"subject":"\u0000"}`)} {
		if _, err := pool.Exec(ctx, `
			INSERT INTO waiting (tenant_id, account_period, record_id, operation, target_period, target_record_id,
			                     fingerprint, canonical, value, topic, partition, "offset", response)
			VALUES ('t3', '2026-11', 'bad-' || $1::int, 'refund', '2026-11', 'x', 0, $2, '\x7b7d', 'usage', 1, $1, '{}')`, i, bad); err != nil {
			t.Fatalf("a waiting row with canonical %q: %v", bad, err)
		}
	}
	if _, err := pool.Exec(ctx, `ANALYZE waiting`); err != nil {
		t.Fatal(err)
	}

	args := map[string]any{"tenant": "t3", "subject": "s-13", "cases_max": inspect.SubjectRowsMax, "rows_max": inspect.SubjectRowsMax}
	for file, table := range map[string]string{
		"sql/conflict_case_open_of_subject.sql": "conflict_cases",
		"sql/waiting_of_subject.sql":            "waiting",
	} {
		plan := settletest.ExplainAnalyze(t, pool, file, args, "")
		if read := settletest.RowsRead(plan, table); read > 10 {
			b, _ := json.Marshal(plan)
			t.Errorf("%s read %d rows of %s for one subject's one row: not found by subject\n%s", file, read, table, b)
		}
	}

	got, err := inspect.New(s).SubjectAttention(ctx, "t3", "s-13")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.OpenCases) != 1 || got.OpenCases[0].RecordID != "r-13" || got.OpenCases[0].IncomingAmount != "2" {
		t.Errorf("open cases of s-13: %+v, want r-13's alone", got.OpenCases)
	}
	if len(got.Waiting) != 1 || got.Waiting[0].RecordID != "w-13" || got.Waiting[0].Currency != "USD" {
		t.Errorf("waiting records of s-13: %+v, want w-13's alone", got.Waiting)
	}
}
