package inspect_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/settletest"
)

// TestSearchAndAccountViews: one term finds a case by its id, a record by
// its record_id, the operation a settlement id names and an account by its
// subject; an account's settlements come in sequence with the balance after
// each; a case links to its stored identity and its adjustment; the export's
// resolutions and the open cases by age count what is there.
func TestSearchAndAccountViews(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	ctx := context.Background()
	u := settletest.Rec()
	rs := settletest.MustSettle(t, s, settletest.Batch(0, 0, settletest.Grant("g-1", "cust-1", "100"), u, settletest.Clone(u, "amount", "55", "quantity", "55"),
		settletest.Rec("tenant_id", "globex", "subject", "cust-1", "record_id", "u-1")))
	caseID := rs[2].CaseID
	if caseID == 0 {
		t.Fatalf("no case: %+v", rs)
	}
	var settlement string
	if err := s.Pool().QueryRow(ctx, `SELECT settlement_id FROM identities WHERE tenant_id = 'acme' AND record_id = 'u-1'`).Scan(&settlement); err != nil {
		t.Fatal(err)
	}
	kinds := func(hs []inspect.SearchHit) (out []string) {
		for _, h := range hs {
			name := h.RecordID
			if h.Kind == inspect.HitAccount {
				name = h.Subject
			}
			out = append(out, h.Kind+":"+h.TenantID+":"+name)
		}
		return out
	}
	for _, tc := range []struct {
		q    inspect.SearchQuery
		want string
	}{
		{inspect.SearchQuery{Text: "u-1"}, "[case:acme:u-1 record:globex:u-1 record:acme:u-1]"},
		{inspect.SearchQuery{Text: "u-1", Tenant: "globex"}, "[record:globex:u-1]"},
		{inspect.SearchQuery{Text: fmt.Sprintf("#%d", caseID)}, "[case:acme:u-1]"},
		{inspect.SearchQuery{Text: settlement}, "[settlement:acme:u-1]"},
		{inspect.SearchQuery{Text: "cust-1"}, "[account:acme:cust-1 account:globex:cust-1]"},
		{inspect.SearchQuery{Text: "cust-1", Tenant: "acme", Period: "2026-11"}, "[account:acme:cust-1]"},
		{inspect.SearchQuery{Text: "nothing-here"}, "[]"},
	} {
		hs, err := inspect.New(s).Search(ctx, tc.q)
		if got := fmt.Sprint(kinds(hs)); err != nil || got != tc.want {
			t.Errorf("search %+v: %s, %v; want %s", tc.q, got, err, tc.want)
		}
	}
	if _, err := inspect.New(s).Search(ctx, inspect.SearchQuery{Text: "  "}); err == nil {
		t.Error("an empty term was searched")
	}

	seq, err := inspect.New(s).AccountSettlements(ctx, "acme", "cust-1", "USD", 0)
	if err != nil || len(seq) != 2 {
		t.Fatalf("account settlements: %+v, %v", seq, err)
	}
	if seq[0].Sequence != 2 || seq[0].RecordID != "u-1" || seq[0].BalanceAfter != "60" || seq[0].SettlementID != settlement ||
		seq[1].Sequence != 1 || seq[1].RecordID != "g-1" || seq[1].BalanceAfter != "100" {
		t.Errorf("account settlements: %+v", seq)
	}

	l, err := inspect.New(s).CaseLinks(ctx, caseID)
	if err != nil || l.Stored == nil || l.Stored.RecordID != "u-1" || l.Stored.FirstDelivery.Offset != 1 ||
		len(l.Stored.Fingerprint) != 16 || l.Adjustment != nil {
		t.Fatalf("case links before resolving: %+v, %v", l, err)
	}
	c, _ := inspect.New(s).Case(ctx, caseID)
	if l.Stored.Fingerprint == c.IncomingFingerprint {
		t.Errorf("stored fingerprint %s is the incoming one", l.Stored.Fingerprint)
	}
	res, err := s.Resolve(ctx, settle.ResolveRequest{CaseID: caseID, Decision: "accept", Reason: "re-read", By: "ana"})
	if err != nil {
		t.Fatal(err)
	}
	if l, err = inspect.New(s).CaseLinks(ctx, caseID); err != nil || l.Adjustment == nil || l.Adjustment.RecordID != fmt.Sprint(caseID) ||
		l.Adjustment.Operation != "resolution" {
		t.Errorf("case links after accept: %+v, %v", l, err)
	}
	rm, err := inspect.New(s).CaseResolutions(ctx, []int64{caseID, 999})
	if r, ok := rm[caseID]; err != nil || len(rm) != 1 || !ok || r.By != "ana" || r.SettlementID != res.SettlementID {
		t.Errorf("resolutions: %+v, %v", rm, err)
	}

	// Two more open cases, aged by hand: 3 h and 3 days.
	settletest.MustSettle(t, s, settletest.Batch(1, 0, settletest.Clone(u, "amount", "56"), settletest.Clone(u, "amount", "57")))
	if _, err := s.Pool().Exec(ctx, `UPDATE conflict_cases SET opened_at = now() - CASE WHEN convert_from(incoming_canonical, 'UTF8') LIKE '%56%'
		THEN interval '3 hours' ELSE interval '3 days' END WHERE status = 'open'`); err != nil {
		t.Fatal(err)
	}
	ages, err := inspect.New(s).OpenCaseAges(ctx, "", time.Now(), []time.Duration{time.Hour, 24 * time.Hour})
	if err != nil || fmt.Sprint(counts(ages)) != "[0 1 1]" || ages[1].FromSeconds != 3600 || ages[2].ToSeconds != 0 {
		t.Errorf("open cases by age: %+v, %v; want [0 1 1]", ages, err)
	}
}

func counts(bs []inspect.AgeBucket) (out []int64) {
	for _, b := range bs {
		out = append(out, b.Count)
	}
	return out
}
