package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/edge/edgetest"
	"github.com/settlehq/settle/edge/webhook/deliveries"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// Design test 2 (outbound): the receiver applies a delivery but its
// acknowledgement is lost; the retry carries the same Idempotency-Key and
// the receiver applies it once.
func TestWebhookSameDeliveryTwiceAcceptedOnce(t *testing.T) {
	t.Parallel()
	s, ws := newStores(t, 6)
	rc := newReceiver(t)
	rc.fail = func(n int, _ string) int {
		if n == 1 {
			return http.StatusBadGateway
		}
		return 0
	}
	wh := newWebhook(t, ws, rc.srv.URL, Config{BackoffMin: time.Millisecond, BackoffMax: 2 * time.Millisecond})
	settleAll(t, s, 0, usage("u-wh", "carol", "3"))
	drain(t, s, wh)
	seen, accepted := rc.counts()
	if seen != 2 || len(accepted) != 1 {
		t.Fatalf("receiver saw %d deliveries of %d settlements, want 2 of 1", seen, len(accepted))
	}
	for k, n := range accepted {
		if n != 1 {
			t.Fatalf("settlement %s applied %d times", k, n)
		}
	}
	if got := edgetest.Count(t, s, `SELECT count(*)::int FROM webhook_deliveries WHERE status = 'done' AND attempts = 2`); got != 1 {
		t.Fatalf("done deliveries after 2 attempts = %d, want 1", got)
	}
	if got := edgetest.LedgerRows(t, s, "u-wh"); got != 1 {
		t.Fatalf("ledger rows = %d, want 1", got)
	}
}

// Design test 3 (outbound): the worker crashes after the receiver got the
// settlement and before it marked the delivery; the next worker takes the
// expired lease over and the receiver applies the settlement once.
func TestWebhookCrashAfterSendThenRetry(t *testing.T) {
	t.Parallel()
	s, ws := newStores(t, 6)
	rc := newReceiver(t)
	wh := newWebhook(t, ws, rc.srv.URL, Config{Lease: 200 * time.Millisecond, RequestTimeout: 100 * time.Millisecond})
	var crashed atomic.Bool
	wh.afterSend = func(deliveries.Delivery) bool { return !crashed.CompareAndSwap(false, true) }
	settleAll(t, s, 0, usage("u-whc", "erin", "4"))
	if n, err := wh.RunOnce(context.Background()); n != 1 || err != nil {
		t.Fatalf("first round: %d %v", n, err)
	}
	if n, err := wh.RunOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("a delivery under a live lease was claimed again (or the round failed: %v)", err)
	}
	time.Sleep(250 * time.Millisecond)
	drain(t, s, wh)
	seen, accepted := rc.counts()
	if seen != 2 || len(accepted) != 1 {
		t.Fatalf("receiver saw %d deliveries of %d settlements, want 2 of 1", seen, len(accepted))
	}
	if got := edgetest.LedgerRows(t, s, "u-whc"); got != 1 {
		t.Fatalf("ledger rows = %d, want 1", got)
	}
}

// Design test 4 (outbound): a stalled delivery attempt can no longer mark
// anything once another attempt took its delivery over.
func TestWebhookStalledAttemptCannotMark(t *testing.T) {
	t.Parallel()
	s, ws := newStores(t, 6)
	rc := newReceiver(t)
	wh := newWebhook(t, ws, rc.srv.URL, Config{})
	settleAll(t, s, 0, usage("u-whs", "gina", "2"))
	ctx := context.Background()
	a, err := ws.Claim(ctx, 10, 50*time.Millisecond)
	if err != nil || len(a) != 1 || a[0].Sent != 0 || a[0].TookOver {
		t.Fatalf("claim A: %+v %v", a, err)
	}
	if err := ws.StartAttempt(ctx, &a[0], 50*time.Millisecond); err != nil || a[0].Attempt != 1 {
		t.Fatalf("start A: attempt %d %v", a[0].Attempt, err)
	}
	time.Sleep(80 * time.Millisecond)
	b, err := ws.Claim(ctx, 10, time.Minute)
	if err != nil || len(b) != 1 || b[0].AttemptID == a[0].AttemptID || b[0].Sent != 1 || !b[0].TookOver {
		t.Fatalf("takeover B: %+v %v", b, err)
	}
	if err := ws.StartAttempt(ctx, &b[0], time.Minute); err != nil || b[0].Attempt != 2 {
		t.Fatalf("start B: attempt %d %v", b[0].Attempt, err)
	}
	// A wakes up while B is still sending: every write it tries matches
	// nothing, a renewal before sending again included.
	for name, err := range map[string]error{
		"start":    ws.StartAttempt(ctx, &a[0], time.Minute),
		"complete": ws.Complete(ctx, a[0], 200),
		"retry":    ws.Retry(ctx, a[0], time.Second, 500, "late"),
		"dead":     ws.DeadLetter(ctx, a[0], 500, "late"),
	} {
		if !errors.Is(err, dberr.ErrClaimLost) {
			t.Errorf("stalled %s: %v, want ErrClaimLost", name, err)
		}
	}
	if _, err := wh.send(ctx, b[0], time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := ws.Complete(ctx, b[0], 200); err != nil {
		t.Fatal(err)
	}
	if got := edgetest.Count(t, s, `SELECT count(*)::int FROM webhook_deliveries WHERE status = 'done' AND attempt_id = $1::uuid`, b[0].AttemptID); got != 1 {
		t.Fatal("the delivery is not marked done by the takeover")
	}
	if got := edgetest.LedgerRows(t, s, "u-whs"); got != 1 {
		t.Fatalf("ledger rows = %d, want 1", got)
	}
}

// After the last attempt a delivery is dead-lettered, visible in
// webhook_dead_letters and in the log, and never sent again.
func TestWebhookDeadLetter(t *testing.T) {
	t.Parallel()
	s, ws := newStores(t, 6)
	rc := newReceiver(t)
	rc.fail = func(int, string) int { return http.StatusServiceUnavailable }
	var logBuf testnet.SyncBuffer
	wh := newWebhook(t, ws, rc.srv.URL, Config{AttemptsMax: 3, BackoffMin: 5 * time.Millisecond, BackoffMax: 10 * time.Millisecond,
		Logger: newTextLogger(&logBuf)})
	if d := wh.retry.Delay(1); d < 5*time.Millisecond || d > 6*time.Millisecond {
		t.Errorf("backoff(1) = %s", d)
	}
	if d := wh.retry.Delay(10); d < 10*time.Millisecond || d > 11*time.Millisecond {
		t.Errorf("backoff(10) = %s, want capped at 10ms", d)
	}
	settleAll(t, s, 0, usage("u-dead", "max", "1"))
	drain(t, s, wh)
	dead, err := ws.DeadLetters(context.Background(), 10)
	if err != nil || len(dead) != 1 || dead[0].Attempts != 3 || dead[0].LastStatus != 503 || dead[0].SettlementID == "" {
		t.Fatalf("dead letters %+v %v", dead, err)
	}
	if seen, _ := rc.counts(); seen != 3 {
		t.Fatalf("receiver saw %d attempts, want 3", seen)
	}
	if !strings.Contains(logBuf.String(), "webhook delivery dead-lettered") || !strings.Contains(logBuf.String(), dead[0].SettlementID) {
		t.Fatalf("no dead-letter log line: %s", logBuf.String())
	}
	if n, err := wh.RunOnce(context.Background()); err != nil || n != 0 {
		t.Fatalf("a dead delivery was claimed again (or the round failed: %v)", err)
	}
}

// Design test 5 (outbound): settlements of one account committed at the
// same time, each in a transaction of its own, reach the receiver once
// each, with a gapless sequence. (Their settling over HTTP:
// edge/ingest.TestConcurrentCallbacksOneAccountSum.)
func TestConcurrentSettlementsDeliveredOnce(t *testing.T) {
	t.Parallel()
	s, ws := newStores(t, 6)
	rc := newReceiver(t)
	wh := newWebhook(t, ws, rc.srv.URL, Config{})
	const n = 16
	var start sync.WaitGroup
	start.Add(1)
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			start.Wait()
			// A partition each, so each record is a batch of its own, as
			// the lanes of separate partitions settle them.
			ins := s.Decode(settletest.Batch(int32(i), 0, usage(fmt.Sprintf("u-sum-%d", i), "hank", strconv.Itoa(i+1))))
			for attempt := 1; ; attempt++ {
				rs, err := s.Settle(context.Background(), "g", ins)
				if errors.Is(err, dberr.ErrContention) && attempt < 5 {
					continue // retried, as the consumer retries contention
				}
				if err != nil || len(rs) != 1 || rs[0].Outcome != message.OutcomeSettled {
					errs <- fmt.Sprintf("record %d: %+v %v", i, rs, err)
				}
				return
			}
		})
	}
	start.Done()
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	drain(t, s, wh)
	_, accepted := rc.counts()
	if len(accepted) != n {
		t.Fatalf("receiver applied %d settlements, want %d", len(accepted), n)
	}
	seqs := map[int64]bool{}
	rc.mu.Lock()
	for _, body := range rc.bodies {
		var resp message.Response
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatal(err)
		}
		seqs[resp.Sequence] = true
	}
	rc.mu.Unlock()
	for i := int64(1); i <= n; i++ {
		if !seqs[i] {
			t.Fatalf("sequence %d missing from the delivered settlements: %v", i, seqs)
		}
	}
}

// A receiver whose URL answers a redirect: followed, Go's client turns a
// 301, 302 or 303 into a GET without the settlement, whose 200 marked the
// delivery done. A redirect is a failed attempt: the delivery is retried
// and dead-lettered with the redirect's status, and the URL it points to
// is never called.
func TestWebhookRedirectIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	s, ws := newStores(t, 4)
	var moved atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusFound)
			return
		}
		moved.Add(1)
	}))
	defer srv.Close()
	// Credentials in the URL (a password, a token in the query) are shown
	// as xxxxx in what is logged and stored.
	hook := strings.Replace(srv.URL, "http://", "http://hook:HOOKPASSWORD@", 1) + "/old?token=HOOKTOKEN"
	var logBuf testnet.SyncBuffer
	wh := newWebhook(t, ws, hook, Config{AttemptsMax: 2, BackoffMin: time.Millisecond, BackoffMax: time.Millisecond,
		Logger: newTextLogger(&logBuf)})
	settleAll(t, s, 0, usage("u-moved", "max", "1"))
	drain(t, s, wh)
	dead, err := ws.DeadLetters(context.Background(), 10)
	if err != nil || len(dead) != 1 || dead[0].LastStatus != http.StatusFound || dead[0].Attempts != 2 {
		t.Fatalf("dead letters %+v %v, want the delivery dead after 2 attempts answered 302", dead, err)
	}
	for what, text := range map[string]string{"the stored error": dead[0].LastError, "the log": logBuf.String(), "URL()": wh.URL()} {
		if strings.Contains(text, "HOOKPASSWORD") || strings.Contains(text, "HOOKTOKEN") || !strings.Contains(text, "xxxxx") {
			t.Errorf("%s shows the URL's secrets, or no URL: %s", what, text)
		}
	}
	if n := moved.Load(); n != 0 {
		t.Fatalf("the redirect was followed %d times", n)
	}
}
