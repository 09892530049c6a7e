package settle_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

func TestResolveFingerprintMismatchAsCorrection(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	u := rec("amount", "40")
	rs := mustSettle(t, s, batch(0, 0, u, clone(u, "amount", "55")))
	caseID := rs[1].CaseID
	if rs[1].Outcome != message.OutcomeQuarantined || caseID == 0 {
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

// TestResolveMismatchOfAnotherAccount: a repeat whose payload names
// another currency or subject than the stored record cannot be accepted as
// its correction (the contract: same subject and currency only): accepting
// it restated the stored record in its own currency and account (41 EUR
// became 41 USD, cust-2's 45 corrected cust-1). The case stays open; with
// a stated amount the analyst restates the stored record.
func TestResolveMismatchOfAnotherAccount(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	u := rec("amount", "40")
	rs := mustSettle(t, s, batch(0, 0, grant("g-1", "cust-1", "100"), u, clone(u, "amount", "41", "currency", "EUR"),
		clone(u, "record_id", "u-2"), clone(u, "record_id", "u-2", "amount", "45", "subject", "cust-2")))
	for _, i := range []int{2, 4} {
		if rs[i].Outcome != message.OutcomeQuarantined || rs[i].CaseID == 0 {
			t.Fatalf("record %d: %+v", i, rs[i])
		}
		_, err := s.Resolve(ctx, settle.ResolveRequest{CaseID: rs[i].CaseID, Decision: "accept", Reason: "r", By: "ana"})
		var re *settle.ResolveError
		if !errors.As(err, &re) {
			t.Errorf("accepting case %d of another account: %v, want a ResolveError", rs[i].CaseID, err)
		}
	}
	if b := balance(t, s.Pool(), "acme", "cust-1", "USD"); b != "20" {
		t.Errorf("cust-1 = %s USD, want 20 (100 less two charges of 40)", b)
	}
	if _, err := s.Resolve(ctx, settle.ResolveRequest{CaseID: rs[2].CaseID, Decision: "accept", Amount: "41", Reason: "r", By: "ana"}); err != nil {
		t.Fatalf("accepting with a stated amount: %v", err)
	}
	if b := balance(t, s.Pool(), "acme", "cust-1", "USD"); b != "19" {
		t.Errorf("cust-1 = %s USD after the stated restatement, want 19", b)
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
	if rs[1].Reason != message.ReasonVersionConflict || rs[2].Reason != message.ReasonFingerprintMismatch {
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

// TestResolutionAfterTheChainMoved: a case accepted after the producer
// corrected the chain restates the chain as it is then, and takes no
// version of the producer's: the producer's next version still applies.
func TestResolutionAfterTheChainMoved(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	u := rec("amount", "10")
	rs := mustSettle(t, s, batch(0, 0, u, clone(u, "amount", "15"),
		rec("kind", "correction", "record_id", "c-2", "corrects", "u-1", "amount", "20", "finalization_version", 2)))
	if got := outcomes(rs); got[1] != "quarantined:fingerprint_mismatch" || got[2] != "settled" {
		t.Fatalf("outcomes %v", got)
	}
	c, err := inspect.New(s).Case(ctx, rs[1].CaseID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Chain == nil || c.Chain.NetCharge != "20" || c.Chain.Version != 2 {
		t.Errorf("case shows chain %+v, want net charge 20 at version 2", c.Chain)
	}
	if _, err := s.Resolve(ctx, settle.ResolveRequest{CaseID: rs[1].CaseID, Decision: "accept", Reason: "meter fixed", By: "ana"}); err != nil {
		t.Fatal(err)
	}
	if b := balance(t, s.Pool(), "acme", "cust-1", "USD"); b != "-15" {
		t.Errorf("balance after the resolution = %s, want -15 (the chain restated to the incoming 15)", b)
	}
	rs = mustSettle(t, s, batch(0, 3, rec("kind", "correction", "record_id", "c-3", "corrects", "u-1", "amount", "25", "finalization_version", 3)))
	if rs[0].Outcome != message.OutcomeSettled {
		t.Errorf("the producer's v3 after the resolution: %v, want settled", outcomes(rs))
	}
	if b := balance(t, s.Pool(), "acme", "cust-1", "USD"); b != "-25" {
		t.Errorf("balance after v3 = %s, want -25", b)
	}
	checkInvariants(t, s.Pool())
}
