package settle_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/settlehq/settle/settle"
)

func TestResolveFingerprintMismatchAsCorrection(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	u := rec("amount", "40")
	rs := mustSettle(t, s, batch(0, 0, u, clone(u, "amount", "55")))
	caseID := rs[1].CaseID
	if rs[1].Outcome != settle.OutcomeQuarantined || caseID == 0 {
		t.Fatalf("conflict: %+v", rs[1])
	}
	// A double submit, raced: one resolution, one correction.
	var wg sync.WaitGroup
	results := make([]*settle.Resolution, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Resolve(ctx, settle.ResolveRequest{CaseID: caseID, Decision: "accept", Reason: "meter fixed", By: "ana"})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = r
		}()
	}
	wg.Wait()
	replays := 0
	for _, r := range results {
		if r != nil && r.Replayed {
			replays++
		}
		if r != nil && (r.Status != "accepted" || r.SettlementID == "") {
			t.Errorf("resolution %+v", r)
		}
	}
	if replays != len(results)-1 {
		t.Errorf("%d of %d submits replayed, want all but one", replays, len(results))
	}
	if b := balance(t, s.Pool(), "acme", "cust-1", "USD"); b != "-55" {
		t.Errorf("balance = %s, want -55 (the charge corrected to the incoming payload)", b)
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM identities WHERE operation = 'resolution'`); n != 1 {
		t.Errorf("resolution identities = %d, want 1", n)
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM outbox WHERE topic = 'usage.results'`); n != 1 {
		t.Errorf("final results published = %d, want 1", n)
	}
	checkInvariants(t, s.Pool())
}

func TestResolveRejectAndStatedCorrection(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	u := rec("record_id", "u-9", "amount", "10", "finalization_version", 3)
	c := rec("kind", "correction", "record_id", "c-9", "corrects", "u-9", "amount", "12", "finalization_version", 3)
	rs := mustSettle(t, s, batch(0, 0, u, c, clone(u, "amount", "11")))
	if rs[1].Reason != settle.ReasonVersionConflict || rs[2].Reason != settle.ReasonFingerprintMismatch {
		t.Fatalf("outcomes %v", outcomes(rs))
	}
	// version_conflict needs a stated amount.
	_, err := s.Resolve(ctx, settle.ResolveRequest{CaseID: rs[1].CaseID, Decision: "accept", Reason: "r", By: "ana"})
	var re *settle.ResolveError
	if !errors.As(err, &re) {
		t.Fatalf("accept without amount: %v, want a ResolveError", err)
	}
	r, err := s.Resolve(ctx, settle.ResolveRequest{CaseID: rs[1].CaseID, Decision: "accept", Amount: "12.5", Reason: "checked the meter", By: "ana"})
	if err != nil || r.Status != "accepted" {
		t.Fatalf("stated correction: %+v %v", r, err)
	}
	if b := balance(t, s.Pool(), "acme", "cust-1", "USD"); b != "-12.5" {
		t.Errorf("balance = %s, want -12.5", b)
	}
	r, err = s.Resolve(ctx, settle.ResolveRequest{CaseID: rs[2].CaseID, Decision: "reject", Reason: "bad resend", By: "ana"})
	if err != nil || r.Status != "rejected" {
		t.Fatalf("reject: %+v %v", r, err)
	}
	if _, err := s.Resolve(ctx, settle.ResolveRequest{CaseID: 999999, Decision: "reject", Reason: "x", By: "y"}); !errors.Is(err, settle.ErrCaseNotFound) {
		t.Errorf("unknown case: %v", err)
	}
	// History is append-only: the resolution cannot be edited.
	if _, err := s.Pool().Exec(ctx, `UPDATE case_resolutions SET reason = 'edited'`); err == nil {
		t.Error("a resolution was edited")
	}
	checkInvariants(t, s.Pool())
}
