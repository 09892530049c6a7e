package webhook

import (
	"context"
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
)

// slowReceiver answers every POST 200 after delay, like a healthy receiver
// that takes its time. Per Idempotency-Key it counts the POSTs and the ones
// that arrived while another POST of the same key was still being served.
type slowReceiver struct {
	delay    time.Duration
	mu       sync.Mutex
	inFlight map[string]int
	posts    map[string]int
	overlaps map[string]int
	srv      *httptest.Server
}

func newSlowReceiver(t *testing.T, delay time.Duration) *slowReceiver {
	rc := &slowReceiver{delay: delay, inFlight: map[string]int{}, posts: map[string]int{}, overlaps: map[string]int{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(HeaderIdempotencyKey)
		rc.mu.Lock()
		rc.posts[key]++
		if rc.inFlight[key] > 0 {
			rc.overlaps[key]++
		}
		rc.inFlight[key]++
		rc.mu.Unlock()
		defer func() {
			rc.mu.Lock()
			rc.inFlight[key]--
			rc.mu.Unlock()
		}()
		select {
		case <-time.After(rc.delay):
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// A receiver that answers 200 after 0.6 s, a 3 s lease and ten workers:
// no POST of a settlement overlaps another of the same settlement, each
// settlement is sent once, and none is dead-lettered although a delivery
// has only three attempts. A POST may take the lease's third (1 s), so a
// worker claims two deliveries at a time; sixteen would take 9.6 s to
// send, three leases. The receiver's delay leaves 0.4 s of that second to
// a busy host (0.8 s, a margin of 0.2, failed under parallel test
// packages: ten POSTs cut off at their deadline and sent again).
func TestWebhookSlowReceiverNoOverlap(t *testing.T) {
	t.Parallel()
	const settlements = 40
	s, ws := newStores(t, 12)
	rc := newSlowReceiver(t, 600*time.Millisecond)
	wh := newWebhook(t, ws, rc.srv.URL, Config{Workers: 10, Lease: 3 * time.Second, AttemptsMax: 3,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	records := make([]map[string]any, settlements)
	for i := range records {
		records[i] = usage("u-slow-"+strconv.Itoa(i), "olga", "1")
	}
	settleAll(t, s, 0, records...)
	if got := edgetest.Count(t, s, `SELECT count(*)::int FROM webhook_deliveries`); got != settlements {
		t.Fatalf("%d deliveries queued, want %d", got, settlements)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = wh.Run(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for edgetest.Count(t, s, `SELECT count(*)::int FROM webhook_deliveries WHERE status IN ('pending', 'in_flight')`) > 0 {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatal("webhook deliveries still open after 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done

	rc.mu.Lock()
	defer rc.mu.Unlock()
	overlaps, posts, repeated := 0, 0, 0
	for key, n := range rc.posts {
		posts += n
		overlaps += rc.overlaps[key]
		if n > 1 {
			repeated++
		}
	}
	dead := edgetest.Count(t, s, `SELECT count(*)::int FROM webhook_deliveries WHERE status = 'dead'`)
	t.Logf("%d settlements, %d POSTs, %d keys sent more than once, %d POSTs overlapping another of their key, %d dead-lettered",
		settlements, posts, repeated, overlaps, dead)
	if overlaps != 0 {
		t.Errorf("%d POSTs overlapped another POST of the same Idempotency-Key, want 0", overlaps)
	}
	if dead != 0 {
		t.Errorf("%d deliveries dead-lettered although every POST was answered 200", dead)
	}
	if len(rc.posts) != settlements {
		t.Errorf("receiver saw %d settlements, want %d", len(rc.posts), settlements)
	}
	if repeated != 0 {
		t.Errorf("%d settlements sent more than once to a healthy receiver (%d POSTs for %d settlements)", repeated, posts, settlements)
	}
	if got := edgetest.Count(t, s, `SELECT count(*)::int FROM webhook_deliveries WHERE status = 'done' AND attempts = 1`); got != settlements {
		t.Errorf("%d deliveries done at their first attempt, want %d", got, settlements)
	}
}

// Settings that would let a POST outlive its lease, or claim more than a
// worker can send within one, are refused or capped.
func TestWebhookConfigLease(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string // "" = valid
	}{
		{"defaults", Config{}, ""},
		{"timeout a tenth short of the lease", Config{Lease: 3 * time.Second, RequestTimeout: 2700 * time.Millisecond}, ""},
		{"timeout inside the margin", Config{Lease: 3 * time.Second, RequestTimeout: 2900 * time.Millisecond}, "must be at most 2.7s"},
		{"timeout equal to the lease", Config{Lease: time.Second, RequestTimeout: time.Second}, "request timeout"},
		{"timeout beyond the default lease", Config{RequestTimeout: 40 * time.Second}, "the lease 30s"},
		{"lease too short", Config{Lease: time.Millisecond}, "at least 10ms"},
	} {
		tc.cfg.URL = "http://127.0.0.1:1/"
		err := tc.cfg.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.err)
		}
	}
	for _, tc := range []struct {
		cfg  Config
		want int
	}{
		{Config{}, 2}, // 27s of a 30s lease, 10s per POST
		{Config{Lease: 3 * time.Second, RequestTimeout: 100 * time.Millisecond}, 16},
		{Config{Lease: 3 * time.Second, RequestTimeout: 100 * time.Millisecond, ClaimRecordsMax: 5}, 5},
		{Config{Lease: 3 * time.Second, RequestTimeout: 2 * time.Second}, 1},
	} {
		tc.cfg.setDefaults()
		if got := tc.cfg.claimMax(); got != tc.want {
			t.Errorf("lease %s, timeout %s, claim records max %d: claims %d, want %d",
				tc.cfg.Lease, tc.cfg.RequestTimeout, tc.cfg.ClaimRecordsMax, got, tc.want)
		}
	}
}

// An attempt whose lease lapsed but that nobody took over renews it before
// it sends; from then on no claim can take the delivery, so no second
// attempt sends beside it.
func TestWebhookRenewedLeaseNotTakenOver(t *testing.T) {
	t.Parallel()
	s, ws := newStores(t, 6)
	newWebhook(t, ws, "http://127.0.0.1:1/", Config{}) // subscribes
	settleAll(t, s, 0, usage("u-renew", "pia", "1"))
	ctx := context.Background()
	a, err := ws.Claim(ctx, 10, 30*time.Millisecond)
	if err != nil || len(a) != 1 {
		t.Fatalf("claim A: %+v %v", a, err)
	}
	time.Sleep(60 * time.Millisecond)
	if err := ws.StartAttempt(ctx, &a[0], time.Minute); err != nil || a[0].Attempt != 1 {
		t.Fatalf("renewing a lapsed lease nobody took over: attempt %d %v", a[0].Attempt, err)
	}
	if b, err := ws.Claim(ctx, 10, time.Minute); err != nil || len(b) != 0 {
		t.Fatalf("a renewed lease was taken over: %+v %v", b, err)
	}
	if err := ws.Complete(ctx, a[0], 200); err != nil {
		t.Fatal(err)
	}
	if got := edgetest.Count(t, s, `SELECT count(*)::int FROM webhook_deliveries WHERE status = 'done' AND attempts = 1`); got != 1 {
		t.Fatalf("done deliveries with one attempt = %d, want 1", got)
	}
}

// A delivery with two attempts: the first is answered 503, the second 200
// but its worker crashes before writing the result. The 200 does not use
// up an attempt: the takeover sends again and the delivery is done, not
// dead-lettered.
func TestWebhookAnsweredSendNotDeadLettered(t *testing.T) {
	t.Parallel()
	s, ws := newStores(t, 6)
	rc := newReceiver(t)
	rc.fail = func(n int, _ string) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return 0
	}
	wh := newWebhook(t, ws, rc.srv.URL, Config{AttemptsMax: 2, Lease: 200 * time.Millisecond, RequestTimeout: 100 * time.Millisecond,
		BackoffMin: time.Millisecond, BackoffMax: 2 * time.Millisecond})
	var sends atomic.Int32
	wh.afterSend = func(deliveries.Delivery) bool { return sends.Add(1) != 2 } // the 200 is lost
	settleAll(t, s, 0, usage("u-lost", "quin", "1"))
	deadline := time.Now().Add(10 * time.Second)
	for edgetest.Count(t, s, `SELECT count(*)::int FROM webhook_deliveries WHERE status IN ('done', 'dead')`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("delivery still open after 10s")
		}
		if n, err := wh.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		} else if n == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if dead, err := ws.DeadLetters(context.Background(), 10); err != nil || len(dead) != 0 {
		t.Fatalf("dead-lettered after a 200: %+v %v", dead, err)
	}
	if got := edgetest.Count(t, s, `SELECT count(*)::int FROM webhook_deliveries WHERE status = 'done' AND attempts = 3 AND failures = 1`); got != 1 {
		t.Fatal("the delivery is not done after three sends, one of them failed")
	}
	if seen, accepted := rc.counts(); seen != 3 || len(accepted) != 1 {
		t.Fatalf("receiver saw %d POSTs of %d settlements, want 3 of 1", seen, len(accepted))
	}
}

// A worker stopped in the middle of a POST has not seen the delivery fail:
// with a single attempt allowed, the next worker sends it again and it is
// done, not dead-lettered.
func TestWebhookStoppedDuringSendNotCounted(t *testing.T) {
	t.Parallel()
	s, ws := newStores(t, 6)
	rc := newSlowReceiver(t, 400*time.Millisecond)
	cfg := Config{Workers: 1, AttemptsMax: 1, Lease: 600 * time.Millisecond, RequestTimeout: 500 * time.Millisecond,
		PollInterval: 10 * time.Millisecond}
	wh := newWebhook(t, ws, rc.srv.URL, cfg)
	settleAll(t, s, 0, usage("u-stop", "rita", "1"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = wh.Run(ctx) }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		rc.mu.Lock()
		n := len(rc.posts)
		rc.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no POST within 5s")
		}
	}
	cancel() // the service stops while the receiver is still answering
	<-done
	if got := edgetest.Count(t, s, `SELECT count(*)::int FROM webhook_deliveries WHERE status = 'dead'`); got != 0 {
		t.Fatal("a POST cut short by a stop dead-lettered its delivery")
	}
	drain(t, s, newWebhook(t, ws, rc.srv.URL, cfg)) // the next process
	if got := edgetest.Count(t, s, `SELECT count(*)::int FROM webhook_deliveries WHERE status = 'done' AND failures = 0`); got != 1 {
		t.Fatal("the delivery is not done, without a failure, after the restart")
	}
}

// A delivery whose every send crashes its worker before the result is
// written is given up after sendsLostMax sends, not sent forever.
func TestWebhookLostSendsBounded(t *testing.T) {
	t.Parallel()
	s, ws := newStores(t, 6)
	rc := newReceiver(t)
	wh := newWebhook(t, ws, rc.srv.URL, Config{Lease: 60 * time.Millisecond, RequestTimeout: 50 * time.Millisecond})
	wh.afterSend = func(deliveries.Delivery) bool { return false }
	settleAll(t, s, 0, usage("u-loop", "sam", "1"))
	drain(t, s, wh)
	dead, err := ws.DeadLetters(context.Background(), 10)
	if err != nil || len(dead) != 1 || dead[0].Attempts != sendsLostMax || dead[0].Failures != 0 ||
		!strings.Contains(dead[0].LastError, "never wrote a result") {
		t.Fatalf("dead letters %+v %v", dead, err)
	}
	if seen, _ := rc.counts(); seen != sendsLostMax {
		t.Fatalf("receiver saw %d POSTs, want %d", seen, sendsLostMax)
	}
}
