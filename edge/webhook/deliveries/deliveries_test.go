package deliveries_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/edge/webhook/deliveries"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// A write of an attempt that does not own its delivery changes nothing and
// says so: dberr.ErrClaimLost, wrapped with the delivery, the settlement
// and the attempt it was about. Claims outside their bounds are refused
// before any SQL runs.
// Seen failing with the fence's no-row check removed.
func TestFencedWritesNameTheDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := settletest.NewStore(t, settle.Config{})
	ws := deliveries.New(s)
	if err := ws.Subscribe(ctx, "settlements"); err != nil {
		t.Fatal(err)
	}
	if rs := settletest.MustSettle(t, s, settletest.Batch(0, 0, settletest.Rec())); rs[0].Outcome != message.OutcomeSettled {
		t.Fatalf("settle: %+v", rs)
	}
	for _, tc := range []struct {
		limit int
		lease time.Duration
		want  string
	}{
		{0, time.Second, "limit 0 must be between 1 and 1000"},
		{deliveries.ClaimDeliveriesMax + 1, time.Second, "limit 1001"},
		{1, time.Microsecond, "lease 1µs is too short"},
	} {
		if ds, err := ws.Claim(ctx, tc.limit, tc.lease); err == nil || !strings.Contains(err.Error(), tc.want) || len(ds) != 0 {
			t.Errorf("claim %d for %s: %v %v, want %q", tc.limit, tc.lease, ds, err, tc.want)
		}
	}
	ds, err := ws.Claim(ctx, 10, time.Minute)
	if err != nil || len(ds) != 1 || ds[0].SettlementID == "" || ds[0].TenantID != "acme" || len(ds[0].Body) == 0 {
		t.Fatalf("claim: %+v %v", ds, err)
	}
	stale := ds[0]
	stale.AttemptID = "00000000-0000-0000-0000-000000000000"
	noun := fmt.Sprintf("delivery %d settlement=%s", stale.ID, stale.SettlementID)
	for name, err := range map[string]error{
		"start":       ws.StartAttempt(ctx, &stale, time.Minute),
		"complete":    ws.Complete(ctx, stale, 200),
		"retry":       ws.Retry(ctx, stale, time.Second, 500, "late"),
		"dead-letter": ws.DeadLetter(ctx, stale, 500, "late"),
	} {
		if !errors.Is(err, dberr.ErrClaimLost) || !strings.Contains(err.Error(), noun) {
			t.Errorf("%s by an attempt that does not own the delivery: %v, want ErrClaimLost naming %q", name, err, noun)
		}
	}
	if stale.Attempt != 0 {
		t.Errorf("a refused start counted attempt %d", stale.Attempt)
	}
	if n := settletest.Count(t, s.Pool(), `SELECT count(*) FROM webhook_deliveries WHERE status = 'in_flight' AND attempts = 0 AND failures = 0`); n != 1 {
		t.Fatal("a write of an attempt that does not own the delivery changed it")
	}
	d := ds[0]
	if err := ws.StartAttempt(ctx, &d, time.Minute); err != nil || d.Attempt != 1 {
		t.Fatalf("start by the owner: attempt %d %v", d.Attempt, err)
	}
	if err := ws.DeadLetter(ctx, d, 503, "gave up"); err != nil {
		t.Fatal(err)
	}
	dead, err := ws.DeadLetters(ctx, 10)
	if err != nil || len(dead) != 1 || dead[0].SettlementID != d.SettlementID || dead[0].Attempts != 1 || dead[0].Failures != 1 ||
		dead[0].LastStatus != 503 || dead[0].LastError != "gave up" {
		t.Fatalf("dead letters: %+v %v", dead, err)
	}
}
