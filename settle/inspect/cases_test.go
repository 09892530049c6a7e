package inspect_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// insertCases writes n synthetic cases straight into conflict_cases: 10
// tenants, the five reasons, four in five open, opened over the last 30
// days. Cases are data for the listing, not for Resolve.
func insertCases(tb testing.TB, pool *pgxpool.Pool, n int) {
	tb.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO conflict_cases (tenant_id, account_period, record_id, operation, reason, incoming_fingerprint,
		                            stored_canonical, incoming_canonical, diff, status, topic, partition, "offset", opened_at)
		SELECT 't' || (g % 10), '2026-' || lpad((1 + g % 12)::text, 2, '0'), 'r-' || g, 'usage',
		       (ARRAY['fingerprint_mismatch','orphan','invalid_link','target_refunded','version_conflict'])[1 + (g / 10) % 5],
		       g, convert_to('{"amount":"1","subject":"s-' || g || '"}', 'UTF8'),
		       convert_to('{"amount":"2","currency":"USD","subject":"s-' || g || '"}', 'UTF8'), '[]',
		       CASE WHEN g % 5 = 0 THEN 'rejected' ELSE 'open' END, 'usage', g % 6, g,
		       now() - (g % 43200) * interval '1 minute'
		  FROM generate_series(1, $1) g`, n)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE conflict_cases`); err != nil {
		tb.Fatal(err)
	}
}

// TestCaseListPlanUsesIndex: on 100,000 cases the default filtered listing
// (open cases of one tenant and reason, newest first), a page under a
// cursor, and narrower filters are read through an index, never by a
// sequential scan of the table; the queue of every open case is too
// (conflict_cases_status_opened).
func TestCaseListPlanUsesIndex(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	insertCases(t, s.Pool(), 100_000)
	ctx := context.Background()
	page, err := inspect.New(s).ListCases(ctx, inspect.CaseFilter{Status: "open", Tenant: "t3", Reason: "orphan"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Cases) != inspect.CasePageRowsDefault || page.Next == "" {
		t.Fatalf("first page: %d cases, next %q", len(page.Cases), page.Next)
	}
	check := func(f inspect.CaseFilter, index string) {
		t.Helper()
		plan, err := inspect.CaseListPlan(inspect.New(s), ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, index) {
			t.Errorf("filter %+v: plan does not use %s:\n%s", f, index, plan)
		}
	}
	check(inspect.CaseFilter{Status: "open", Tenant: "t3", Reason: "orphan"}, "conflict_cases_queue")
	check(inspect.CaseFilter{Status: "open", Tenant: "t3", Reason: "orphan", After: page.Next}, "conflict_cases_queue")
	check(inspect.CaseFilter{Status: "open", Tenant: "t3", Reason: "orphan", OpenedBefore: time.Now().Add(-time.Hour)}, "conflict_cases_queue")
	check(inspect.CaseFilter{Status: "open", Tenant: "t3"}, "Index")
	check(inspect.CaseFilter{Status: "open", Tenant: "t3", Reason: "orphan", Period: "2026-04"}, "Index")
	check(inspect.CaseFilter{Status: "open"}, "conflict_cases_status_opened")
}

// TestCaseListPaging: pages under the cursor cover every matching case
// once, newest first, and filters hold on every page.
func TestCaseListPaging(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	insertCases(t, s.Pool(), 2000)
	ctx := context.Background()
	f := inspect.CaseFilter{Status: "open", Tenant: "t1", Limit: 37}
	var (
		seen []int64
		last time.Time
	)
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("paging does not end")
		}
		page, err := inspect.New(s).ListCases(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Cases {
			if c.TenantID != "t1" || c.Status != "open" {
				t.Fatalf("case %d (%s, %s) does not match the filter", c.ID, c.TenantID, c.Status)
			}
			if !last.IsZero() && c.OpenedAt.After(last) {
				t.Fatalf("case %d out of order", c.ID)
			}
			last = c.OpenedAt
			seen = append(seen, c.ID)
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	want := settletest.Count(t, s.Pool(), `SELECT count(*) FROM conflict_cases WHERE tenant_id = 't1' AND status = 'open'`)
	slices.Sort(seen)
	if len(slices.Compact(seen)) != want || len(seen) != want {
		t.Errorf("pages held %d distinct of %d cases", len(slices.Compact(seen)), want)
	}
	// A filter that can match nothing says so instead of listing nothing.
	for _, f := range []inspect.CaseFilter{{Reason: "bogus"}, {Period: "2026-13"}, {Period: "2026-1"}} {
		if _, err := inspect.New(s).ListCases(ctx, f); !errors.Is(err, inspect.ErrBadFilter) {
			t.Errorf("filter %+v: %v, want ErrBadFilter", f, err)
		}
	}
	if _, err := inspect.New(s).ListCases(ctx, inspect.CaseFilter{After: "garbage!"}); !errors.Is(err, inspect.ErrBadFilter) {
		t.Errorf("bad cursor: %v, want ErrBadFilter", err)
	}
	older, err := inspect.New(s).ListCases(ctx, inspect.CaseFilter{OpenedBefore: time.Now().Add(-24 * time.Hour), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range older.Cases {
		if time.Since(c.OpenedAt) < 24*time.Hour {
			t.Fatalf("older-than filter let case %d through, opened %s", c.ID, c.OpenedAt)
		}
	}
	if len(older.Cases) == 0 {
		t.Error("older-than filter found nothing")
	}
}

// BenchmarkConflictList100k measures one filtered page (open cases of one
// tenant and reason, 50 rows) over 100,000 cases.
func BenchmarkConflictList100k(b *testing.B) {
	s := settletest.NewStore(b, settle.Config{})
	insertCases(b, s.Pool(), 100_000)
	ctx := context.Background()
	f := inspect.CaseFilter{Status: "open", Tenant: "t3", Reason: "orphan"}
	page, err := inspect.New(s).ListCases(ctx, f)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		f    inspect.CaseFilter
	}{
		{"tenant+reason", f},
		{"tenant+reason/page2", inspect.CaseFilter{Status: "open", Tenant: "t3", Reason: "orphan", After: page.Next}},
		{"open", inspect.CaseFilter{Status: "open"}},
		{"counts", inspect.CaseFilter{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if bc.name == "counts" {
					if _, err := inspect.New(s).CountCases(ctx, "t3", ""); err != nil {
						b.Fatal(err)
					}
					continue
				}
				p, err := inspect.New(s).ListCases(ctx, bc.f)
				if err != nil || len(p.Cases) != inspect.CasePageRowsDefault {
					b.Fatalf("%d cases, %v", len(p.Cases), err)
				}
			}
		})
	}
}

// TestCaseDetailAndExplain: a conflicting repeat opens a case with both
// payloads and the deliveries that joined it; the side-by-side view marks
// exactly the fields that differ; accepting it settles one correction that
// explain shows in the account's rows; a second accept changes nothing.
func TestCaseDetailAndExplain(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	ctx := context.Background()
	u := settletest.Rec()
	conflict := settletest.Clone(u, "amount", "55", "quantity", "55")
	rs := settletest.MustSettle(t, s, settletest.Batch(0, 0, settletest.Grant("g-1", "cust-1", "100"), u, conflict))
	rs = append(rs, settletest.MustSettle(t, s, settletest.Batch(1, 0, conflict))...) // the same conflict again, elsewhere
	if got := settletest.Outcomes(rs); !slices.Equal(got, []string{"settled", "settled", "quarantined:fingerprint_mismatch", "quarantined:fingerprint_mismatch"}) {
		t.Fatalf("outcomes %v", got)
	}
	if rs[2].CaseID == 0 || rs[3].CaseID != rs[2].CaseID {
		t.Fatalf("case ids %d, %d: want one case", rs[2].CaseID, rs[3].CaseID)
	}
	page, err := inspect.New(s).ListCases(ctx, inspect.CaseFilter{Status: "open", Tenant: "acme", Reason: "fingerprint_mismatch"})
	if err != nil || len(page.Cases) != 1 {
		t.Fatalf("queue: %+v, %v", page, err)
	}
	if c := page.Cases[0]; c.StoredAmount != "40" || c.IncomingAmount != "55" || c.Subject != "cust-1" {
		t.Errorf("queue row %+v", c)
	}
	c, err := inspect.New(s).Case(ctx, rs[2].CaseID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Differing, []string{"amount", "quantity"}) {
		t.Errorf("differing %v, want amount, quantity", c.Differing)
	}
	if len(c.Deliveries) != 2 || c.Deliveries[0].Partition != 0 || c.Deliveries[0].Offset != 2 || c.Deliveries[1].Partition != 1 {
		t.Errorf("deliveries %+v: want usage/0@2 and usage/1@0", c.Deliveries)
	}
	var stored map[string]any
	if err := json.Unmarshal(c.Stored, &stored); err != nil || stored["amount"] != "40" {
		t.Errorf("stored payload %s (%v)", c.Stored, err)
	}
	if _, err := inspect.New(s).Case(ctx, 999999); !errors.Is(err, settle.ErrCaseNotFound) {
		t.Errorf("missing case: %v", err)
	}

	res, err := s.Resolve(ctx, settle.ResolveRequest{CaseID: c.ID, Decision: "accept", Reason: "meter re-read", By: "ana"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Resolve(ctx, settle.ResolveRequest{CaseID: c.ID, Decision: "accept", Reason: "double click", By: "ana"})
	if err != nil || !again.Replayed || again.SettlementID != res.SettlementID {
		t.Fatalf("second accept: %+v, %v", again, err)
	}
	if b := settletest.Balance(t, s.Pool(), "acme", "cust-1", "USD"); b != "45" {
		t.Errorf("balance %s, want 100 - 55 = 45", b)
	}
	c, err = inspect.New(s).Case(ctx, c.ID)
	if err != nil || c.Status != "accepted" || c.Resolution == nil || c.Resolution.By != "ana" || c.Resolution.SettlementID != res.SettlementID {
		t.Fatalf("case after accept: %+v, %v", c, err)
	}

	// explain of the usage: its chain lists the adjustment; explain of the
	// adjustment (record_id = case id) shows its ledger row.
	e, err := inspect.New(s).Explain(ctx, "acme", "2026-11", "u-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Operations) != 1 || len(e.Cases) != 1 || e.Cases[0].Status != "accepted" {
		t.Fatalf("explain u-1: %d operations, %d cases", len(e.Operations), len(e.Cases))
	}
	op := e.Operations[0]
	// Every delivery of the identity: the one that settled it and the two
	// conflicting repeats that joined the case.
	if len(op.Deliveries) != 3 || op.Deliveries[1].CaseID != c.ID || len(op.Entries) != 1 || op.Entries[0].Amount != "-40" || len(op.Outbox) != 1 {
		t.Errorf("explain u-1: deliveries %v entries %v outbox %v", op.Deliveries, op.Entries, op.Outbox)
	}
	if op.Links.Chain == nil || op.Links.Chain.NetCharge != "55" || len(op.Links.Corrections) != 1 ||
		op.Links.Corrections[0].SettlementID != res.SettlementID {
		t.Errorf("explain u-1 links: %+v", op.Links)
	}
	adj, err := inspect.New(s).Explain(ctx, "acme", "2026-11", fmt.Sprint(c.ID))
	if err != nil || len(adj.Operations) != 1 {
		t.Fatalf("explain the adjustment: %+v, %v", adj, err)
	}
	if a := adj.Operations[0]; a.Operation != "resolution" || len(a.Entries) != 1 || a.Entries[0].Amount != "-15" || a.Links.Root == nil {
		t.Errorf("adjustment: %+v", a)
	}
	empty, err := inspect.New(s).Explain(ctx, "acme", "2026-11", "never-seen")
	if err != nil || !empty.Empty() {
		t.Errorf("unknown record: %+v, %v", empty, err)
	}
}

// TestExplainWaitingAndDeadLetters: a refund that waits shows under its
// target's explain; dead letters list with their bytes and reasons.
func TestExplainWaitingAndDeadLetters(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	ctx := context.Background()
	refund := settletest.Rec("kind", "refund", "record_id", "u-9")
	ins := settletest.Batch(0, 0, refund)
	ins = append(ins, message.Input{Topic: "usage", Partition: 0, Offset: 1, Value: []byte(`{not json`)})
	settletest.MustSettle(t, s, ins)
	e, err := inspect.New(s).Explain(ctx, "acme", "2026-11", "u-9")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Waiting) != 1 || e.Waiting[0].Operation != "refund" || e.Waiting[0].Status != "waiting" ||
		e.Waiting[0].Delivery == nil || e.Waiting[0].Delivery.Outcome != "waiting" {
		t.Errorf("waiting: %+v", e.Waiting)
	}
	ds, err := inspect.New(s).DeadLetters(ctx, inspect.DeadLetterFilter{})
	if err != nil || len(ds) != 1 || ds[0].Reason != "invalid_json" || string(ds[0].Value) != `{not json` || ds[0].Source.Offset != 1 {
		t.Fatalf("dead letters: %+v, %v", ds, err)
	}
	if d, err := inspect.New(s).DeadLetter(ctx, ds[0].ID); err != nil || d.ID != ds[0].ID {
		t.Errorf("dead letter by id: %v", err)
	}
	if _, err := inspect.New(s).DeadLetter(ctx, 424242); !errors.Is(err, inspect.ErrNoSuchDeadLetter) {
		t.Errorf("missing dead letter: %v", err)
	}
	if ds, err := inspect.New(s).DeadLetters(ctx, inspect.DeadLetterFilter{Reason: "too_large"}); err != nil || len(ds) != 0 {
		t.Errorf("reason filter: %d, %v", len(ds), err)
	}
}

// TestCaseCountMatchesTheList: the export's count (conflict_case_list_count.sql)
// repeats the listing's filters; for each filter, alone and together, it
// counts exactly the cases the listing pages through, so the two queries
// cannot drift apart unseen. Seen failing with the tenant left out of the
// count's parameters (counted 1500, listed 150).
func TestCaseCountMatchesTheList(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	insertCases(t, s.Pool(), 1500)
	ctx := context.Background()
	st := inspect.New(s)
	day := time.Now().Add(-24 * time.Hour)
	for _, f := range []inspect.CaseFilter{
		{}, {Status: "open"}, {Status: "rejected"}, {Tenant: "t3"}, {Reason: "orphan"}, {Period: "2026-04"},
		{OpenedBefore: day}, {OpenedAfter: day},
		{Status: "open", Tenant: "t1", Reason: "invalid_link", Period: "2026-02", OpenedBefore: time.Now().Add(-time.Hour)},
	} {
		listed := 0
		lf := f
		lf.Limit = 1000
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatalf("filter %+v: paging does not end", f)
			}
			page, err := st.ListCases(ctx, lf)
			if err != nil {
				t.Fatal(err)
			}
			listed += len(page.Cases)
			if page.Next == "" {
				break
			}
			lf.After = page.Next
		}
		n, err := st.CountCasesUpTo(ctx, f, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(listed) {
			t.Errorf("filter %+v: counted %d, listed %d", f, n, listed)
		}
		if capped, err := st.CountCasesUpTo(ctx, f, 5); err != nil || capped != min(int64(listed), 5) {
			t.Errorf("filter %+v: counted %d (%v) up to 5, want %d", f, capped, err, min(listed, 5))
		}
	}
}
