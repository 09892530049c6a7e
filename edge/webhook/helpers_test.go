package webhook

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/edge/edgetest"
	"github.com/settlehq/settle/edge/webhook/deliveries"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// newStores gives the test its own migrated database, a settling store that
// works as the service role settle_app (edgetest.AppStore) and the webhook
// rows over the same pool.
func newStores(t *testing.T, maxConns int32) (*settle.Store, *deliveries.Store) {
	t.Helper()
	s := edgetest.AppStore(t, maxConns)
	return s, deliveries.New(s)
}

// usage is a usage record of tenant acme, the way a metering system would
// send it.
func usage(record, subject, amount string) map[string]any {
	return settletest.Rec("record_id", record, "subject", subject, "amount", amount,
		"meter", "api_calls", "quantity", "1", "unit", "call")
}

// settleAll settles recs in one batch on partition of the usage topic, from
// offset 0, and fails unless every record is settled: one outbox row each,
// and so one delivery each once the webhook subscribed.
func settleAll(t *testing.T, s *settle.Store, partition int32, recs ...map[string]any) {
	t.Helper()
	for i, r := range settletest.MustSettle(t, s, settletest.Batch(partition, 0, recs...)) {
		if r.Outcome != message.OutcomeSettled {
			t.Fatalf("record %d: %s %s, want settled", i, r.Outcome, r.Reason)
		}
	}
}

// receiver is an external system that deduplicates webhook deliveries by
// their Idempotency-Key, as the design asks of every receiver.
type receiver struct {
	mu       sync.Mutex
	seen     int            // POSTs received
	accepted map[string]int // settlement_id -> times applied (must stay 1)
	bodies   map[string][]byte
	// fail, when set, answers the n-th POST (1-based) with its status
	// after the receiver applied it (an acknowledgement lost on the way).
	fail func(n int, key string) int
	srv  *httptest.Server
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{accepted: map[string]int{}, bodies: map[string][]byte{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get(HeaderIdempotencyKey)
		rc.mu.Lock()
		rc.seen++
		n := rc.seen
		if _, dup := rc.accepted[key]; !dup && key != "" {
			rc.accepted[key] = 1
			rc.bodies[key] = body
		} else if dup && !bytes.Equal(rc.bodies[key], body) {
			rc.accepted[key]++ // same key, other body: counted, so the test fails
		}
		fail := rc.fail
		rc.mu.Unlock()
		if fail != nil {
			if st := fail(n, key); st != 0 {
				w.WriteHeader(st)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) counts() (seen int, accepted map[string]int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	m := make(map[string]int, len(rc.accepted))
	for k, v := range rc.accepted {
		m[k] = v
	}
	return rc.seen, m
}

// newWebhook returns a sender to url over ws, subscribed.
func newWebhook(t *testing.T, ws *deliveries.Store, url string, cfg Config) *Webhook {
	t.Helper()
	cfg.URL = url
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	wh, err := New(ws, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Subscribe(context.Background()); err != nil {
		t.Fatal(err)
	}
	return wh
}

// drain runs webhook rounds until no delivery is pending or in flight.
func drain(t *testing.T, s *settle.Store, wh *Webhook) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for edgetest.Count(t, s, `SELECT count(*)::int FROM webhook_deliveries WHERE status IN ('pending', 'in_flight')`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("webhook deliveries still open after 10s")
		}
		if n, err := wh.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		} else if n == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
