package settle_test

import (
	"context"
	"testing"
	"time"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/message"
)

// TestOrphansAndAutoResolve: a refund and a capture whose targets never came
// wait; past the orphan timeout the sweep charges the capture as plain usage
// and opens an orphan case for the refund, once; redeliveries answer with
// those outcomes; when the target arrives the refund applies and its case
// resolves itself.
func TestOrphansAndAutoResolve(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	refund := signal("refund", "job-1", "cust-1")
	capture := rec("record_id", "k-1", "hold_id", "h-missing", "amount", "5")
	rs := mustSettle(t, s, batch(0, 0, refund, capture))
	if got := outcomes(rs); got[0] != "waiting" || got[1] != "waiting" {
		t.Fatalf("outcomes %v, want both waiting", got)
	}
	time.Sleep(20 * time.Millisecond)
	n, err := s.SweepOrphans(ctx, 10*time.Millisecond)
	if err != nil || n != 2 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if n, _ := s.SweepOrphans(ctx, 10*time.Millisecond); n != 0 {
		t.Errorf("second sweep handled %d, want 0", n)
	}
	// The capture was charged as plain usage; the refund opened an orphan case.
	if b := balance(t, s.Pool(), "acme", "cust-1", "USD"); b != "-5" {
		t.Errorf("balance = %s, want -5", b)
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM conflict_cases WHERE reason = 'orphan' AND status = 'open'`); n != 1 {
		t.Errorf("open orphan cases = %d, want 1", n)
	}
	// Redelivered now, the two input records answer with what was
	// published for them since: the capture charged, the refund orphaned.
	var orphanCase int64
	if err := s.Pool().QueryRow(ctx, `SELECT id FROM conflict_cases WHERE reason = 'orphan'`).Scan(&orphanCase); err != nil {
		t.Fatal(err)
	}
	again := mustSettle(t, s, batch(0, 0, refund, capture))
	if r := again[0]; !r.Redelivered || r.Outcome != message.OutcomeQuarantined || r.Reason != message.ReasonOrphan || r.CaseID != orphanCase {
		t.Errorf("redelivered refund = %s/%s case %d, want quarantined/orphan case %d", r.Outcome, r.Reason, r.CaseID, orphanCase)
	}
	if r := again[1]; !r.Redelivered || r.Outcome != message.OutcomeSettled || len(r.Response) == 0 {
		t.Errorf("redelivered capture = %s with response %q, want settled with its response", r.Outcome, r.Response)
	}
	// The target arrives: the refund is applied and its case closes itself.
	mustSettle(t, s, batch(1, 0, rec("record_id", "job-1", "amount", "40")))
	if r := mustSettle(t, s, batch(0, 0, refund))[0]; r.Outcome != message.OutcomeSettled || r.CaseID != 0 {
		t.Errorf("refund redelivered after it was applied = %s case %d, want settled", r.Outcome, r.CaseID)
	}
	if b := balance(t, s.Pool(), "acme", "cust-1", "USD"); b != "-5" {
		t.Errorf("balance = %s, want -5 (job-1 charged 40 and refunded)", b)
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM conflict_cases WHERE reason = 'orphan' AND status = 'auto_resolved'`); n != 1 {
		t.Errorf("auto_resolved orphan cases = %d, want 1", n)
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM outbox WHERE topic = 'usage.results' AND convert_from(value, 'UTF8')::json->>'outcome' <> 'waiting'`); n != 3 {
		t.Errorf("final results = %d, want 3 (capture charged, refund orphaned, refund applied)", n)
	}
	// Their waiting results went the same way, ahead of them.
	if n := count(t, s.Pool(), `SELECT count(*) FROM outbox WHERE topic = 'usage.results' AND convert_from(value, 'UTF8')::json->>'outcome' = 'waiting'`); n != 2 {
		t.Errorf("waiting results = %d, want 2 (refund and capture)", n)
	}
	checkInvariants(t, s.Pool())
}

// TestHoldExpiry: a hold the funds cannot cover is refused; an expired hold
// is released (one expire settlement) in the transaction of the next hold
// that needs its funds, and the sweep releases holds nobody looks at, once.
func TestHoldExpiry(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	exp := time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	hold := func(id, amount string) map[string]any {
		return rec("kind", "hold", "record_id", id, "amount", amount, "expires_at", exp,
			"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)
	}
	rs := mustSettle(t, s, batch(0, 0, grant("g", "cust-1", "100"), hold("h-1", "60"), hold("h-2", "60")))
	if got := outcomes(rs); got[1] != "settled" || got[2] != "refused:insufficient_funds" {
		t.Fatalf("outcomes %v", got)
	}
	time.Sleep(400 * time.Millisecond)
	// A hold after expiry sees the funds again: the expired hold is
	// released in its transaction first.
	rs = mustSettle(t, s, batch(0, 3, rec("kind", "hold", "record_id", "h-3", "amount", "90",
		"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)))
	if rs[0].Outcome != message.OutcomeSettled {
		t.Fatalf("hold after expiry: %v", outcomes(rs))
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM identities WHERE operation = 'expire'`); n != 1 {
		t.Errorf("expire settlements = %d, want 1", n)
	}
	// The sweeper releases holds nobody looks at.
	// A second's margin: a hold already past its expires_at when it is
	// settled (a slow run) is refused, and there is nothing to sweep.
	due := time.Now().Add(time.Second)
	mustSettle(t, s, batch(0, 4, grant("g2", "cust-2", "10"),
		rec("kind", "hold", "record_id", "h-4", "subject", "cust-2", "amount", "10", "expires_at", due.UTC().Format(time.RFC3339Nano),
			"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)))
	time.Sleep(time.Until(due) + 100*time.Millisecond)
	n, err := s.ExpireHolds(ctx)
	if err != nil || n != 1 {
		t.Fatalf("expire holds: %d %v", n, err)
	}
	if n, _ := s.ExpireHolds(ctx); n != 0 {
		t.Errorf("second sweep expired %d", n)
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM outbox_messages WHERE topic = 'settlements' AND convert_from(value, 'UTF8')::json->>'kind' = 'expire'`); n != 2 {
		t.Errorf("published expiries = %d, want 2", n)
	}
	checkInvariants(t, s.Pool())
}

// TestExpireCanonicalForm: the expire settlement's canonical form comes from
// the one canonical encoder, so analysts' tools read it back for any record
// id (Go's %q spelled U+E0001 as \U000e0001, which is not JSON).
func TestExpireCanonicalForm(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	id := "h-\U000E0001"
	due := time.Now().Add(time.Second) // margin as in TestHoldExpiry
	mustSettle(t, s, batch(0, 0, grant("g", "cust-1", "100"),
		rec("kind", "hold", "record_id", id, "amount", "10", "expires_at", due.UTC().Format(time.RFC3339Nano),
			"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)))
	time.Sleep(time.Until(due) + 100*time.Millisecond)
	if n, err := s.ExpireHolds(ctx); err != nil || n != 1 {
		t.Fatalf("expire holds: %d %v", n, err)
	}
	var canonical []byte
	if err := s.Pool().QueryRow(ctx, `SELECT canonical FROM identities WHERE operation = 'expire'`).Scan(&canonical); err != nil {
		t.Fatal(err)
	}
	want := fingerprint.Canonical(&record.Record{TenantID: "acme", AccountPeriod: "2026-11", RecordID: id, Kind: record.KindExpire})
	if string(canonical) != string(want) {
		t.Errorf("stored canonical %s, want %s", canonical, want)
	}
	fields, err := fingerprint.CanonicalFields(canonical)
	if err != nil {
		t.Fatalf("CanonicalFields(%s): %v", canonical, err)
	}
	if fields["record_id"] != id {
		t.Errorf("record_id read back as %q, want %q", fields["record_id"], id)
	}
	if _, err := fingerprint.Diff(canonical, want); err != nil {
		t.Errorf("Diff: %v", err)
	}
}
