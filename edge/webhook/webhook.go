// Package webhook is the HTTP edge's way out: it POSTs every settlement
// written after it subscribed to one external endpoint, at least once, with
// Idempotency-Key: <settlement_id> so the receiver applies it once. Each
// delivery is claimed by one attempt with a lease, renewed right before its
// POST; only the attempt that owns a delivery writes its result: done,
// retried after a backoff, or dead-lettered (after AttemptsMax failures, or
// after sends that kept losing their result).
//
// It owns the sending: the workers, the leases' timing (a POST always ends
// before its lease, so no two attempts of a delivery overlap), the retry
// policy and the bounds on sends that never wrote a result. It never speaks
// SQL (package edge/webhook/deliveries holds the rows, behind the small Store
// declared here) and never settles anything: what it sends is what the
// settling transaction queued, and it knows nothing of the records API
// (package edge/ingest).
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/settlehq/settle/canary"
	"github.com/settlehq/settle/edge/webhook/deliveries"
	"github.com/settlehq/settle/internal/backoff"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/message"
)

// Store is what webhook delivery needs of the webhook rows: the
// subscription, the deliveries' claims and their fenced results.
// *deliveries.Store is one.
type Store interface {
	Subscribe(ctx context.Context, topic string) error
	Claim(ctx context.Context, limit int, lease time.Duration) ([]deliveries.Delivery, error)
	StartAttempt(ctx context.Context, d *deliveries.Delivery, lease time.Duration) error
	Complete(ctx context.Context, d deliveries.Delivery, httpStatus int) error
	Retry(ctx context.Context, d deliveries.Delivery, backoff time.Duration, httpStatus int, errText string) error
	DeadLetter(ctx context.Context, d deliveries.Delivery, httpStatus int, errText string) error
}

var _ Store = (*deliveries.Store)(nil)

// Headers of a delivery's POST.
const (
	// HeaderIdempotencyKey carries the settlement_id: the receiver applies
	// a settlement once per key.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderAttempt numbers the sends of one delivery, from 1.
	HeaderAttempt = "Settle-Attempt"
)

// Config configures webhook delivery of settlements. The zero value
// of every field but URL is a documented default.
type Config struct {
	// URL receives one POST per settlement: the settlement message as on
	// the settlements topic, with Idempotency-Key: <settlement_id>.
	URL string

	// Topic is the outbox topic delivered. "" = "settlements".
	Topic string

	// SendCanary sends the canary tenant's settlements (canary.Tenant)
	// too. false: they are marked done, HTTP status 0, without a POST: a
	// receiver that does not know the canary never sees its records.
	SendCanary bool

	// Workers is how many deliveries are sent at once. 0 = 4.
	Workers int

	// ClaimRecordsMax caps the deliveries one worker claims at a time.
	// 0 = 16. A worker never claims more than it can send one after the
	// other within one lease (Lease, less its margin, over RequestTimeout),
	// so what it holds is not left waiting past its lease.
	ClaimRecordsMax int

	// Lease is how long a claimed delivery belongs to its attempt; past
	// it, another worker takes it over. An attempt renews it right before
	// it sends. 0 = 30s.
	Lease time.Duration

	// RequestTimeout bounds one POST, from the lease renewal before it to
	// the end of the answer. It must leave a tenth of the lease as margin,
	// so a POST is over before its lease can be taken over. 0 = Lease / 3.
	RequestTimeout time.Duration

	// AttemptsMax is the number of failed attempts (a non-2xx answer, or
	// none within RequestTimeout) after which a delivery is dead-lettered.
	// A send that never wrote its result (its worker crashed) is no failed
	// attempt: the attempt that takes it over sends it again (five such
	// sends dead-letter the delivery, so one that crashes its workers is
	// not sent forever). 0 = 10.
	AttemptsMax int

	// BackoffMin and BackoffMax bound the wait before a retry: it doubles
	// from BackoffMin per attempt, capped at BackoffMax. 0 = 1s and 5m.
	BackoffMin, BackoffMax time.Duration

	// PollInterval is how long an idle worker waits before looking for due
	// deliveries. 0 = 200ms.
	PollInterval time.Duration

	// Client sends the POSTs. nil = a client with RequestTimeout. Each
	// POST is bounded by RequestTimeout whatever the client's own timeout.
	// Redirects are never followed, whatever the client's CheckRedirect:
	// a 3xx answer is a failed attempt.
	Client *http.Client

	// Logger receives the log. nil = slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	c.Topic = cmp.Or(c.Topic, message.TopicSettlements)
	c.Workers = cmp.Or(c.Workers, 4)
	c.ClaimRecordsMax = cmp.Or(c.ClaimRecordsMax, 16)
	c.Lease = cmp.Or(c.Lease, 30*time.Second)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, c.Lease/3)
	c.AttemptsMax = cmp.Or(c.AttemptsMax, 10)
	c.BackoffMin = cmp.Or(c.BackoffMin, time.Second)
	c.BackoffMax = cmp.Or(c.BackoffMax, 5*time.Minute)
	c.PollInterval = cmp.Or(c.PollInterval, 200*time.Millisecond)
	client := http.Client{Timeout: c.RequestTimeout}
	if c.Client != nil {
		client = *c.Client
	}
	// Followed, a 301, 302 or 303 turns the POST into a GET without the
	// settlement, whose 2xx would mark the delivery done.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.Client = &client
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// sendsLostMax bounds the sends of one delivery that never wrote a result
// (their worker crashed, stalled past its lease or stopped mid-POST). It is
// not AttemptsMax, which counts the receiver's failures: a send answered
// 2xx whose result was lost is no failure, and the attempt that takes the
// delivery over sends it again; only a delivery that keeps losing its
// sends is given up.
const sendsLostMax = 5

// leaseMargin is the part of a lease a POST may not use: it covers the
// renewal's round trip and clocks that run at slightly different rates, so
// the POST has ended before the database lets another attempt take over.
func leaseMargin(lease time.Duration) time.Duration { return lease / 10 }

// Validate reports the first setting that cannot work, saying how to fix it.
// It checks the settings as they will be used, defaults filled in.
func (c Config) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("webhook: no URL (--webhook-url)")
	case c.Workers < 0 || c.Workers > 256:
		return fmt.Errorf("webhook: workers %d must be between 1 and 256 (0 = 4)", c.Workers)
	case c.ClaimRecordsMax < 0 || c.ClaimRecordsMax > deliveries.ClaimDeliveriesMax:
		return fmt.Errorf("webhook: claim records max %d must be between 1 and %d (0 = 16)", c.ClaimRecordsMax, deliveries.ClaimDeliveriesMax)
	case c.AttemptsMax < 0 || c.AttemptsMax > 1000:
		return fmt.Errorf("webhook: attempts max %d must be between 1 and 1000 (0 = 10)", c.AttemptsMax)
	case c.Lease < 0 || c.RequestTimeout < 0 || c.BackoffMin < 0 || c.BackoffMax < 0 || c.PollInterval < 0:
		return errors.New("webhook: durations must be positive (0 = default)")
	case c.BackoffMin > 0 && c.BackoffMax > 0 && c.BackoffMax < c.BackoffMin:
		return errors.New("webhook: backoff max must not be below backoff min")
	}
	c.setDefaults()
	switch {
	case c.Lease < 10*time.Millisecond:
		return fmt.Errorf("webhook: lease %s must be at least 10ms (--webhook-lease)", c.Lease)
	case c.RequestTimeout > c.Lease-leaseMargin(c.Lease):
		return fmt.Errorf("webhook: request timeout %s must be at most %s, the lease %s less a tenth: "+
			"a POST still running when its lease ends would be sent again beside it "+
			"(shorten --webhook-request-timeout or lengthen --webhook-lease)",
			c.RequestTimeout, c.Lease-leaseMargin(c.Lease), c.Lease)
	}
	return nil
}

// claimMax is how many deliveries one worker claims at a time: no more than
// it can send one after the other, each bounded by RequestTimeout, within
// the lease they were claimed with.
func (c Config) claimMax() int {
	return max(1, min(c.ClaimRecordsMax, int((c.Lease-leaseMargin(c.Lease))/c.RequestTimeout)))
}

// Webhook delivers settlements to an external endpoint. At least once:
// a delivery whose attempt crashed after the receiver got it is sent again,
// with the same Idempotency-Key, and the receiver deduplicates on it.
type Webhook struct {
	store Store
	cfg   Config
	log   *slog.Logger
	// retry is the wait after a delivery's attempt-th failure: doubling
	// from BackoffMin, capped at BackoffMax, up to a tenth longer so the
	// retries of a failed burst spread out. The attempt count is the
	// delivery row's, so retries survive restarts.
	retry backoff.Policy

	// afterSend, when set (tests only), runs after the receiver answered
	// and before the result is written. It returns false to simulate a
	// crash there: nothing is written and the lease runs out.
	afterSend func(d deliveries.Delivery) bool
}

// New returns a webhook sender over store (the service gives it
// deliveries.New of its settle.Store). It does not subscribe: Run does.
func New(store Store, cfg Config) (*Webhook, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return &Webhook{store: store, cfg: cfg, log: cfg.Logger.With("component", "webhook"),
		retry: backoff.Policy{Min: cfg.BackoffMin, Max: cfg.BackoffMax, Jitter: backoff.Jitter{Above: 0.1}}}, nil
}

// URL is the receiver's URL as logs and stored errors show it: its
// password and query values (tokens) replaced by xxxxx.
func (wh *Webhook) URL() string { return redactURL(wh.cfg.URL) }

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(the webhook URL, which does not parse)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q.Set(k, "xxxxx")
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Subscribe queues every settlement written from now on for delivery.
func (wh *Webhook) Subscribe(ctx context.Context) error {
	return wh.store.Subscribe(ctx, wh.cfg.Topic)
}

// Run subscribes, then delivers with Workers workers until ctx is done.
// Each worker's lifetime is this call's.
func (wh *Webhook) Run(ctx context.Context) error {
	if err := wh.Subscribe(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for range wh.cfg.Workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				n, err := wh.RunOnce(ctx)
				if err != nil && ctx.Err() == nil {
					wh.log.Warn("webhook round failed; retrying", "err", err)
				}
				if n == 0 || err != nil {
					backoff.Sleep(ctx, wh.cfg.PollInterval, nil)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// RunOnce claims the due deliveries it can send within one lease (at most
// ClaimRecordsMax) and sends them one after the other. It returns how many
// it claimed.
func (wh *Webhook) RunOnce(ctx context.Context) (int, error) {
	ds, err := wh.store.Claim(ctx, wh.cfg.claimMax(), wh.cfg.Lease)
	if err != nil {
		return 0, err
	}
	for _, d := range ds {
		if ctx.Err() != nil {
			// Not sent, so not counted: the next claim after the lease
			// sends it.
			break
		}
		wh.deliver(ctx, d)
	}
	// A cancelled context only stops sending early; what was claimed is
	// the answer, and the leases bring the rest back.
	return len(ds), nil //nolint:nilerr // see above
}

// deliver makes one attempt of d and writes its result (fenced). The
// attempt sends only while it owns d: it renews its lease right before the
// POST, and the POST ends (RequestTimeout) before that lease does, so a
// takeover, which needs the lease to have run out, never overlaps it.
func (wh *Webhook) deliver(ctx context.Context, d deliveries.Delivery) {
	log := wh.log.With("settlement_id", d.SettlementID, "delivery", d.ID, "sent", d.Sent, "failed", d.Failed)
	if canary.IsCanary(d.TenantID) && !wh.cfg.SendCanary {
		if err := wh.store.Complete(context.WithoutCancel(ctx), d, 0); err != nil {
			wh.logWriteErr(log, err)
		}
		return
	}
	// Sends that never wrote a result are bounded too: a delivery whose
	// every send crashes its worker is given up, not sent forever.
	if lost := d.Sent - d.Failed; d.TookOver && lost >= sendsLostMax {
		wh.deadLetter(ctx, log, d, 0, fmt.Sprintf("%d sends never wrote a result within their lease", lost))
		return
	}
	// The POST's deadline counts from before the renewal, so it ends
	// before the renewed lease, whatever the renewal's round trip took.
	deadline := time.Now().Add(wh.cfg.RequestTimeout)
	if err := wh.store.StartAttempt(ctx, &d, wh.cfg.Lease); err != nil {
		if errors.Is(err, dberr.ErrClaimLost) {
			log.Info("webhook delivery was taken over before it was sent; not sending", "err", err)
		} else if ctx.Err() == nil {
			log.Warn("could not renew a webhook lease; the delivery is sent when its lease ends", "err", err)
		}
		return
	}
	log = log.With("attempt", d.Attempt)
	status, err := wh.send(ctx, d, deadline)
	if wh.afterSend != nil && !wh.afterSend(d) {
		return
	}
	if err != nil && ctx.Err() != nil {
		// Stopped, not failed: nothing is written, and once the lease has
		// run out (after this POST's deadline, so never beside it) the next
		// claim sends it again.
		log.Info("webhook POST cut short by a stop; it is sent again after its lease", "err", err)
		return
	}
	wctx := context.WithoutCancel(ctx)
	if err == nil {
		// Written even when the lease ran out meanwhile: the fence is the
		// attempt id, so only a takeover makes it fail.
		if err := wh.store.Complete(wctx, d, status); err != nil {
			wh.logWriteErr(log, err)
		}
		return
	}
	if failed := d.Failed + 1; failed >= wh.cfg.AttemptsMax {
		wh.deadLetter(wctx, log, d, status, err.Error())
		return
	}
	wait := wh.retry.Delay(d.Failed + 1)
	log.Info("webhook delivery failed; retrying", "err", err, "status", status, "retry_in", wait)
	if err := wh.store.Retry(wctx, d, wait, status, err.Error()); err != nil {
		wh.logWriteErr(log, err)
	}
}

func (wh *Webhook) deadLetter(ctx context.Context, log *slog.Logger, d deliveries.Delivery, status int, why string) {
	if err := wh.store.DeadLetter(context.WithoutCancel(ctx), d, status, why); err != nil {
		wh.logWriteErr(log, err)
		return
	}
	log.Warn("webhook delivery dead-lettered: see table webhook_dead_letters", "tenant", d.TenantID,
		"sends", max(d.Attempt, d.Sent), "status", status, "err", why)
}

func (wh *Webhook) logWriteErr(log *slog.Logger, err error) {
	if errors.Is(err, dberr.ErrClaimLost) {
		// This attempt ran past its lease and another took the delivery
		// over: its result is the other attempt's to write.
		log.Info("webhook attempt was taken over; its result is dropped", "err", err)
		return
	}
	log.Warn("could not record a webhook attempt; the delivery is retried when its lease ends", "err", err)
}

// send POSTs d once, giving up at deadline. A 2xx answer is a delivery;
// anything else an error.
func (wh *Webhook) send(ctx context.Context, d deliveries.Delivery, deadline time.Time) (int, error) {
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, wh.cfg.URL, bytes.NewReader(d.Body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderIdempotencyKey, d.SettlementID)
	req.Header.Set(HeaderAttempt, strconv.Itoa(d.Attempt))
	resp, err := wh.cfg.Client.Do(req)
	if err != nil {
		var ue *url.Error // it names the URL with its query: logged and stored
		if errors.As(err, &ue) {
			return 0, fmt.Errorf("POST %s: %w", wh.URL(), ue.Err)
		}
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }() // drained below; the status is the answer
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return resp.StatusCode, fmt.Errorf("receiver answered %s to %s (Location: %q): redirects are not followed; give --webhook-url the final URL",
			resp.Status, wh.URL(), redactURL(resp.Header.Get("Location")))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}
