package ingest

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/settlehq/settle/edge/edgetest"
)

// TestUsageAndRefundRaceThroughTheEdge: a usage and its refund posted at
// the same moment under different keys (300 pairs on 10 accounts, 16
// clients) always meet, whichever transaction commits first: no refund is
// left waiting and every account nets to zero.
func TestUsageAndRefundRaceThroughTheEdge(t *testing.T) {
	t.Parallel()
	s, srv := newAPIConns(t, Config{}, nil, 16)
	const pairs = 300
	type req struct{ key, body string }
	reqs := make(chan req)
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[int]int{}
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range reqs {
				rep := postUntilAnswered(t, srv, tokenAcme, r.key, r.body)
				mu.Lock()
				answers[rep.status]++
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < pairs; i++ {
		subject := fmt.Sprintf("cust-%d", i%10)
		record := fmt.Sprintf("job-%d", i)
		reqs <- req{"u-" + record, usage("acme", record, subject, "3")}
		reqs <- req{"r-" + record, fmt.Sprintf(`{"tenant_id":"acme","account_period":"2026-11","record_id":%q,"kind":"refund","subject":%q,"occurred_at":"2026-11-03T10:00:00Z"}`, record, subject)}
	}
	close(reqs)
	wg.Wait()
	for status, n := range answers {
		if status >= 300 && status != http.StatusAccepted {
			t.Errorf("%d requests answered %d", n, status)
		}
	}
	if n := edgetest.Count(t, s, `SELECT count(*)::int FROM waiting WHERE status <> 'applied'`); n != 0 {
		t.Errorf("%d refunds still wait although every usage settled", n)
	}
	for i := 0; i < 10; i++ {
		if b := balance(t, s, fmt.Sprintf("cust-%d", i)); b != "0" {
			t.Errorf("cust-%d balance = %s, want 0 (every usage refunded)", i, b)
		}
	}
	t.Logf("answers by status: %v", answers)
}
