package settletest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
)

// Month is a generated month of one tenant's records, settled through
// Store.Settle, and the records as the metering system produced them: the
// month-end tests' input (statement and source check).
type Month struct {
	Store    *settle.Store
	Produced []map[string]any // in the order produced
}

// MonthSubjects is how many accounts a Month has.
const MonthSubjects = 8

const monthUsages = 14

// NewMonth generates and settles acme's 2026-11: per subject a grant,
// usages on two meters, corrections (some twice), refunds, refund-then-
// reclaim pairs, a captured hold, a released hold, and one subject's hold
// that expires; one subject is in EUR.
func NewMonth(t *testing.T) *Month {
	t.Helper()
	m := &Month{Store: NewStore(t, settle.Config{})}
	usage := func(s, id, amount, meter string, kv ...any) map[string]any {
		cur := "USD"
		if s == "cust-7" {
			cur = "EUR"
		}
		r := Rec(append([]any{"record_id", id, "subject", s, "amount", amount, "currency", cur, "meter", meter, "quantity", amount}, kv...)...)
		return r
	}
	var first, second []map[string]any
	var (
		expiring  map[string]any
		expiresAt time.Time
	)
	for i := range MonthSubjects {
		s := fmt.Sprintf("cust-%d", i)
		g := Grant("g-"+s, s, "1000")
		h := Rec("record_id", "h-cap-"+s, "kind", "hold", "subject", s, "amount", "50", "meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)
		hr := Clone(h, "record_id", "h-rel-"+s, "amount", "20")
		if s == "cust-7" {
			g["currency"], h["currency"], hr["currency"] = "EUR", "EUR", "EUR"
		}
		first = append(first, g, h, hr)
		if i == 2 {
			expiresAt = time.Now().Add(1500 * time.Millisecond)
			expiring = Clone(h, "record_id", "h-exp-"+s, "amount", "15", "expires_at", expiresAt.UTC().Format(time.RFC3339Nano))
			first = append(first, expiring)
		}
		for j := range monthUsages {
			meter := "gpu_seconds"
			if j%2 == 1 {
				meter = "storage_gb"
			}
			id := fmt.Sprintf("u-%s-%d", s, j)
			first = append(first, usage(s, id, fmt.Sprint(j+1), meter))
			switch {
			case j%5 == 0:
				second = append(second, usage(s, "c1-"+id, fmt.Sprint(2*j+3), meter, "kind", "correction", "corrects", id, "finalization_version", 2))
				if j%10 == 0 {
					second = append(second, usage(s, "c2-"+id, fmt.Sprint(j+2), meter, "kind", "correction", "corrects", "c1-"+id, "finalization_version", 3))
				}
			case j%7 == 3:
				second = append(second, Signal("refund", id, s))
			case j%7 == 4:
				second = append(second, Signal("refund", id, s), Signal("reclaim", id, s))
			}
		}
		capture := usage(s, "u-cap-"+s, "30", "gpu_seconds", "hold_id", "h-cap-"+s)
		release := Signal("hold_release", "h-rel-"+s, s)
		second = append(second, capture, release)
	}
	m.Produced = append(first, second...)
	ctx := context.Background()
	for i := 0; i < len(m.Produced); i += 500 {
		part := m.Produced[i:min(i+500, len(m.Produced))]
		rs := MustSettle(t, m.Store, Batch(0, int64(i), part...))
		for j, r := range rs {
			if r.Outcome != message.OutcomeSettled {
				t.Fatalf("month record %v: %s %s", part[j]["record_id"], r.Outcome, r.Reason)
			}
		}
	}
	time.Sleep(time.Until(expiresAt) + 100*time.Millisecond)
	if n, err := m.Store.ExpireHolds(ctx); err != nil || n != 1 {
		t.Fatalf("expire holds: %d, %v (want the one hold expired)", n, err)
	}
	return m
}
