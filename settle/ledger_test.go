package settle_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"

	"github.com/settlehq/settle/settle/message"
)

// ledgerTrials is 200 in the full run (`go test ./settle -run TestRefundThenRecover
// -ledger.trials=200`, about 7 minutes on 2 cores); CI runs fewer.
var ledgerTrials = flag.Int("ledger.trials", 20, "concurrent trials per row of TestRefundThenRecover")

// signal builds a refund (failure) or reclaim (success) of usage id.
// TestRefundThenRecover: any order of failure and success signals,
// duplicated and raced by 16 connections, nets to the charge once or to
// nothing — never twice the cost, never a credit (-ledger.trials per row).
func TestRefundThenRecover(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	rows := []struct {
		name   string
		phases [][]string // signals sent concurrently by 16 connections, phase after phase
		want   string     // the account's balance: -cost or 0
	}{
		{"charged only", nil, "-40"},
		{"charged+refunded", [][]string{{"refund", "refund"}}, "0"},
		{"charged+refunded+reclaimed", [][]string{{"refund"}, {"reclaim", "reclaim"}}, "-40"},
		{"success before failure", [][]string{{"reclaim"}, {"refund", "refund"}}, "-40"},
		{"both raced", [][]string{{"refund", "reclaim"}}, ""}, // either -40 or 0: the order decides
	}
	trials := *ledgerTrials
	for ri, row := range rows {
		got := map[string]int{}
		for trial := 0; trial < trials; trial++ {
			subject := fmt.Sprintf("r%d-t%d", ri, trial)
			usage := fmt.Sprintf("job-%d-%d", ri, trial)
			mustSettle(t, s, batch(int32(ri), int64(trial*1000), rec("record_id", usage, "subject", subject, "amount", "40")))
			for pi, phase := range row.phases {
				var wg sync.WaitGroup
				for w := 0; w < 16; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var recs []map[string]any
						for _, k := range phase {
							recs = append(recs, signal(k, usage, subject))
						}
						if _, err := s.Settle(ctx, "", s.Decode(batch(int32(100+w), int64(trial*1000+pi*100), recs...))); err != nil {
							t.Error(err)
						}
					}()
				}
				wg.Wait()
			}
			got[balance(t, s.Pool(), "acme", subject, "USD")]++
		}
		for b, n := range got {
			ok := b == row.want || (row.want == "" && (b == "-40" || b == "0"))
			if !ok {
				t.Errorf("%s: %d of %d trials ended at balance %s, want %s", row.name, n, trials, b, row.want)
			}
		}
		t.Logf("%-28s balances over %d trials: %v", row.name, trials, got)
	}
	checkInvariants(t, s.Pool())
}

// TestHoldsNeverOverReserve: 16 writers create holds against one account at
// once; together they never reserve more than its available balance.
func TestHoldsNeverOverReserve(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	mustSettle(t, s, batch(0, 0, grant("g", "cust-1", "100")))
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		settled, refuse int
	)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < 4; b++ {
				var recs []map[string]any
				for i := 0; i < 3; i++ {
					recs = append(recs, rec("kind", "hold", "record_id", fmt.Sprintf("h-%d-%d-%d", w, b, i), "amount", "7",
						"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil))
				}
				rs, err := s.Settle(ctx, "", s.Decode(batch(int32(1+w), int64(b*10), recs...)))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, r := range rs {
					switch {
					case r.Outcome == message.OutcomeSettled:
						settled++
					case r.Reason == message.ReasonInsufficientFunds:
						refuse++
					default:
						t.Errorf("hold: %s %s", r.Outcome, r.Reason)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if settled != 14 || refuse != 16*4*3-14 {
		t.Errorf("%d holds settled, %d refused; want 14 of 7 against 100, the rest insufficient_funds", settled, refuse)
	}
	var held string
	if err := s.Pool().QueryRow(ctx, `SELECT held::text FROM account_states WHERE subject = 'cust-1'`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != "98" {
		t.Errorf("held = %s, want 98", held)
	}
	checkInvariants(t, s.Pool())
}
