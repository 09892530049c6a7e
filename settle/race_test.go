package settle_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/reconcile"
)

// TestDependentRacesItsTarget: a usage and its refund (and a correction of
// another usage) settled at the same moment by two writers (two partitions,
// two transactions) always meet, whichever commits first: every dependent
// is applied, none is left waiting, every account nets to what the contract
// says, and a dependent that answered waiting has its waiting result in the
// outbox ahead of its final result.
func TestDependentRacesItsTarget(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	const pairs = 120
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4*pairs)
	sem := make(chan struct{}, 8) // pairs in flight at once
	for i := 0; i < pairs; i++ {
		subject := fmt.Sprintf("cust-%d", i%10)
		usage := rec("record_id", fmt.Sprintf("u-%d", i), "subject", subject, "amount", "10")
		var dependent map[string]any
		if (i/10)%2 == 0 {
			dependent = signal("refund", fmt.Sprintf("u-%d", i), subject)
		} else {
			dependent = rec("kind", "correction", "record_id", fmt.Sprintf("c-%d", i), "corrects", fmt.Sprintf("u-%d", i),
				"subject", subject, "amount", "4", "finalization_version", 2)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			sem <- struct{}{}
			defer func() { <-sem }()
			var pair sync.WaitGroup
			for p, r := range []map[string]any{usage, dependent} {
				pair.Add(1)
				go func() {
					defer pair.Done()
					if _, err := s.Settle(ctx, "g", s.Decode(batch(int32(p), int64(i), r))); err != nil {
						errs <- err
					}
				}()
			}
			pair.Wait()
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("settle: %v", err)
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM waiting WHERE status <> 'applied'`); n != 0 {
		t.Errorf("%d operations still wait although every target settled", n)
	}
	// Refunded usages net to 0; corrected ones to 4: ten accounts of 12
	// pairs each, half of each kind.
	for i := 0; i < 10; i++ {
		if b := balance(t, s.Pool(), "acme", fmt.Sprintf("cust-%d", i), "USD"); b != "-24" {
			t.Errorf("cust-%d balance = %s, want -24 (6 usages refunded, 6 corrected to 4)", i, b)
		}
	}
	// Per input record, the waiting result is queued before the final one.
	var misordered, waited int
	err := s.Pool().QueryRow(ctx, `
		WITH r AS (SELECT id, convert_from(value, 'UTF8')::json AS v FROM outbox WHERE topic = 'usage.results'),
		     w AS (SELECT id, v->'source'->>'partition' AS p, v->'source'->>'offset' AS o FROM r WHERE v->>'outcome' = 'waiting'),
		     f AS (SELECT id, v->'source'->>'partition' AS p, v->'source'->>'offset' AS o FROM r WHERE v->>'outcome' <> 'waiting')
		SELECT (SELECT count(*) FROM w JOIN f USING (p, o) WHERE f.id < w.id), (SELECT count(*) FROM w)`).Scan(&misordered, &waited)
	if err != nil {
		t.Fatal(err)
	}
	if misordered != 0 {
		t.Errorf("%d final results queued before their waiting result", misordered)
	}
	finals := count(t, s.Pool(), `SELECT count(*) FROM outbox WHERE topic = 'usage.results' AND convert_from(value, 'UTF8')::json->>'outcome' <> 'waiting'`)
	if finals != waited {
		t.Errorf("%d dependents answered waiting, %d final results: every waiting one gets exactly one", waited, finals)
	}
	t.Logf("%d of %d dependents waited for their target", waited, pairs)
	checkInvariants(t, s.Pool())
}

// TestWakeWaitingSafetyNet: an operation left waiting although its target
// has settled (here: made so by hand, as a restore could) is applied by the
// sweep, with its final result, and reconcile reports it until then.
func TestWakeWaitingSafetyNet(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	rs := mustSettle(t, s, batch(0, 0, signal("refund", "u-1", "cust-1")))
	if rs[0].Outcome != message.OutcomeWaiting {
		t.Fatalf("refund = %s, want waiting", rs[0].Outcome)
	}
	// The target settles while its transaction cannot see the waiting row:
	// hide it, settle, put it back.
	if _, err := s.Pool().Exec(ctx, `UPDATE waiting SET target_record_id = 'elsewhere'`); err != nil {
		t.Fatal(err)
	}
	mustSettle(t, s, batch(1, 0, rec("record_id", "u-1", "amount", "10")))
	if _, err := s.Pool().Exec(ctx, `UPDATE waiting SET target_record_id = 'u-1'`); err != nil {
		t.Fatal(err)
	}
	rep, err := reconcile.Run(ctx, s, reconcile.Input{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range rep.Findings {
		if f.Class == reconcile.ClassWaitingTargetSettled && f.RecordID == "u-1" && f.Operation == "refund" {
			found = true
		}
	}
	if !found {
		t.Errorf("reconcile did not report the refund waiting for a settled target: %+v", rep.Findings)
	}
	n, err := s.WakeWaiting(ctx)
	if err != nil || n != 1 {
		t.Fatalf("wake waiting: %d, %v; want 1", n, err)
	}
	if n, err := s.WakeWaiting(ctx); err != nil || n != 0 {
		t.Errorf("second sweep: %d, %v; want 0", n, err)
	}
	if b := balance(t, s.Pool(), "acme", "cust-1", "USD"); b != "0" {
		t.Errorf("balance = %s, want 0 (charged 10, refunded)", b)
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM outbox WHERE topic = 'usage.results' AND convert_from(value, 'UTF8')::json->>'outcome' = 'settled'`); n != 1 {
		t.Errorf("final results = %d, want 1", n)
	}
	reconcileClean(t, s, reconcile.Input{}, "after the sweep")
	checkInvariants(t, s.Pool())
}

// TestReconcileReportsOverdueHold: a hold still active well past its
// expiry (nobody swept it) is a discrepancy until it is released.
func TestReconcileReportsOverdueHold(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	exp := time.Now().Add(50 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	mustSettle(t, s, batch(0, 0, grant("g", "cust-1", "100"),
		rec("kind", "hold", "record_id", "h-1", "amount", "10", "expires_at", exp,
			"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)))
	time.Sleep(100 * time.Millisecond)
	rep, err := reconcile.Run(ctx, s, reconcile.Input{HoldExpiryGrace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range rep.Findings {
		if f.Class == reconcile.ClassHoldOverdue && f.RecordID == "h-1" {
			found = true
		}
	}
	if !found {
		t.Errorf("reconcile did not report the overdue hold: %+v", rep.Findings)
	}
	if _, err := s.ExpireHolds(ctx); err != nil {
		t.Fatal(err)
	}
	reconcileClean(t, s, reconcile.Input{HoldExpiryGrace: time.Millisecond}, "after expiry")
}

// TestPeriodCloseWaitsForBatchesInFlight: a batch that has read the
// period open and is still settling (held here on its account's next
// ledger row, which another transaction has written and not committed:
// the batch waits to see whether that row's key is taken, whether it keeps
// the account's state or reads it under the account's lock) is waited for
// by `settle period close`, so no settlement that commits after the close
// has returned is without the late flag.
func TestPeriodCloseWaitsForBatchesInFlight(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	mustSettle(t, s, batch(0, 0, rec("record_id", "u-0")))
	blocker, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx)
	if _, err := blocker.Exec(ctx, `INSERT INTO ledger_entries (id, identity_id, account_id, tenant_id, bucket, amount)
		SELECT max(e.id) + 1, 0, a.id, a.tenant_id, 'balance', 0
		  FROM accounts a JOIN ledger_entries e ON e.tenant_id = a.tenant_id AND e.account_id = a.id
		 WHERE a.subject = 'cust-1' GROUP BY a.id, a.tenant_id`); err != nil {
		t.Fatal(err)
	}
	inFlight := make(chan message.Result, 1)
	go func() {
		rs, err := s.Settle(ctx, "g", s.Decode(batch(0, 1, rec("record_id", "u-1"))))
		if err != nil {
			t.Error(err)
			close(inFlight)
			return
		}
		inFlight <- rs[0]
	}()
	// Let the batch reach the blocker's row, then close the period.
	time.Sleep(200 * time.Millisecond)
	closed := make(chan error, 1)
	go func() {
		_, err := s.ClosePeriod(ctx, "acme", "2026-11", "test")
		closed <- err
	}()
	var closedFirst bool
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
		closedFirst = true
	case <-time.After(500 * time.Millisecond):
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r, ok := <-inFlight
	if !ok {
		return
	}
	late := strings.Contains(string(r.Response), `"late":true`)
	if closedFirst && !late {
		t.Errorf("the close returned while a batch was settling, and that batch committed after it without late: %s", r.Response)
	}
	if !closedFirst {
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
	}
	after := mustSettle(t, s, batch(0, 2, rec("record_id", "u-2")))[0]
	if !strings.Contains(string(after.Response), `"late":true`) {
		t.Errorf("a settlement after the close is not late: %s", after.Response)
	}
}

// TestSameWaitingOperationFromTwoWriters: one correction whose target has
// not settled, settled at the same moment by two writers (the HTTP edge and
// the consumer), waits once: the other is its duplicate, never an error.
func TestSameWaitingOperationFromTwoWriters(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		c := rec("kind", "correction", "record_id", fmt.Sprintf("c-%d", i), "corrects", fmt.Sprintf("u-%d", i), "amount", "4", "finalization_version", 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		outcomes := make([]message.Outcome, 2)
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				rs, err := s.Settle(ctx, "g", s.Decode(batch(int32(w), int64(i), c)))
				if err != nil {
					t.Errorf("writer %d, correction %d: %v", w, i, err)
					return
				}
				outcomes[w] = rs[0].Outcome
			}()
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
		got := map[message.Outcome]int{outcomes[0]: 1}
		got[outcomes[1]]++
		if got[message.OutcomeWaiting] != 1 || got[message.OutcomeDuplicate] != 1 {
			t.Fatalf("correction %d: outcomes %v, want one waiting and one duplicate", i, outcomes)
		}
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM waiting`); n != 30 {
		t.Errorf("%d waiting rows, want 30", n)
	}
}
