// Package relay publishes the transactional outbox: the settlements and dead
// letters that settling transactions wrote to table outbox are produced to
// their topics, in id order, and marked published once the broker has
// acknowledged them.
//
// It owns leadership and publication order. It never decides what a
// message says (package settle wrote it) and never speaks SQL itself: it
// uses the store's outbox lease.
//
// Delivery is at least once: a relay that dies after the broker acknowledged
// a message but before marking it published publishes it again, unchanged,
// with the same settlement_id header and body. Consumers deduplicate by
// settlement_id (and can check the per-account sequence for gaps). Two
// relays never publish side by side in normal operation: only the holder
// of the outbox lease publishes, and it publishes on a single producer in
// id order, which keeps every account's settlements in sequence.
//
// A message the broker refuses for good (too large for the topic, an
// invalid record) is never retried for ever: the relay parks its row
// (outbox.Lease.Park), counts it, and publishes what follows it.
// Parking is terminal, so it holds back nothing, not even later messages of
// the same key; a row that failed for a reason a retry may cure holds back
// the later rows of its key.
package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/settlehq/settle/internal/backoff"
	"github.com/settlehq/settle/internal/crashpoint"
	"github.com/settlehq/settle/internal/kafkahdr"
	"github.com/settlehq/settle/outlet"
	"github.com/settlehq/settle/relay/outbox"
	"github.com/settlehq/settle/telemetry"
)

// LockKeyDefault is the advisory lock key of the relay's leadership when
// Config.LockKey is 0 ("outbox" in ASCII). Two deployments that share a
// database but publish to different clusters need different keys.
const LockKeyDefault int64 = 0x6f7574626f78

// Config configures a Relay. The zero value of every field but Brokers is a
// documented default.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string

	// BatchRowsMax is the rows read and published per round: the queue
	// rows (one per settling transaction and tenant) that reach it, whole,
	// so a round may take one transaction's rows past it. 0 = 1,000.
	BatchRowsMax int

	// PollInterval is how long an idle leader waits before looking for new
	// rows, unless a transaction of its own process wrote some first
	// (outbox.Store.Written). 0 = 100ms: the outbox queue makes an empty
	// look cheap.
	PollInterval time.Duration

	// RoundLinger is how long a leader woken by a transaction of its own
	// process waits before its next round, so that the round also takes
	// the rows of the transactions that commit meanwhile: a round costs a
	// read of the queue, a produce request and the marking transaction
	// however few rows it takes, and the HTTP edge commits a small group
	// every few milliseconds. Settlements go out up to this much later.
	// 0 = 5ms.
	RoundLinger time.Duration

	// StandbyInterval is how often a relay that is not the leader tries to
	// take over. 0 = 1s.
	StandbyInterval time.Duration

	// BackoffMin and BackoffMax bound the backoff after a failure of the
	// database or the broker. 0 = 100ms and 10s.
	BackoffMin, BackoffMax time.Duration

	// FlushTimeout bounds the final round a stopping relay makes to publish
	// what is left. 0 = 10s.
	FlushTimeout time.Duration

	// LockKey names the leadership lock. 0 = LockKeyDefault.
	LockKey int64

	// ClientOpts are extra franz-go options (TLS, SASL, logging), applied
	// after the relay's own.
	ClientOpts []kgo.Opt

	// Logger receives the relay's log. nil = slog.Default().
	Logger *slog.Logger

	// Metrics counts published messages by topic. nil = none.
	Metrics *telemetry.Metrics

	// TracerProvider starts a producer span for each message that carries
	// a trace context (a settlement of a traced record), and the message
	// goes out naming that span. nil = headers pass through unchanged.
	TracerProvider trace.TracerProvider
}

func (c *Config) setDefaults() {
	c.BatchRowsMax = cmp.Or(c.BatchRowsMax, 1000)
	c.PollInterval = cmp.Or(c.PollInterval, 100*time.Millisecond)
	c.RoundLinger = cmp.Or(c.RoundLinger, 5*time.Millisecond)
	c.StandbyInterval = cmp.Or(c.StandbyInterval, time.Second)
	c.BackoffMin = cmp.Or(c.BackoffMin, 100*time.Millisecond)
	c.BackoffMax = cmp.Or(c.BackoffMax, 10*time.Second)
	c.FlushTimeout = cmp.Or(c.FlushTimeout, 10*time.Second)
	c.LockKey = cmp.Or(c.LockKey, LockKeyDefault)
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// Validate reports the first setting that cannot work, saying how to fix it.
func (c Config) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("relay: no brokers: set at least one host:port (--brokers or KAFKA_BROKERS)")
	case c.BatchRowsMax < 0 || c.BatchRowsMax > 100_000:
		return fmt.Errorf("relay: batch rows max %d: must be between 1 and 100000 (0 = 1000)", c.BatchRowsMax)
	case c.PollInterval < 0 || c.RoundLinger < 0 || c.StandbyInterval < 0 || c.FlushTimeout < 0 || c.BackoffMin < 0 || c.BackoffMax < 0:
		return errors.New("relay: intervals and timeouts must be positive (0 = default)")
	case c.PollInterval >= outbox.LeaseIdleMax || c.StandbyInterval >= outbox.LeaseIdleMax || c.RoundLinger >= outbox.LeaseIdleMax:
		return fmt.Errorf("relay: poll and standby intervals and the round linger must be below %s, or PostgreSQL ends the lock's idle connection", outbox.LeaseIdleMax)
	}
	return nil
}

// Outbox is what the relay needs of the store: the lease under which the
// leader reads, publishes and marks the outbox, and the signal that a
// transaction of this process wrote to it. *outbox.Store implements it.
type Outbox interface {
	Lease(ctx context.Context, key int64) (*outbox.Lease, error)
	Written() <-chan struct{}
}

// Relay publishes the outbox. Create it with New and run it with Run.
type Relay struct {
	store Outbox
	cfg   Config
	log   *slog.Logger

	leader    atomic.Bool
	published atomic.Int64
	parked    atomic.Int64
	rounds    atomic.Int64 // rounds that read rows (tests)
}

// New returns a relay over store's outbox. It does not connect: Run does.
func New(store Outbox, cfg Config) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return &Relay{store: store, cfg: cfg, log: cfg.Logger.With("component", "relay")}, nil
}

// Leader reports whether this relay currently holds the outbox lease.
func (r *Relay) Leader() bool { return r.leader.Load() }

// Published returns how many messages this relay has published and marked.
func (r *Relay) Published() int64 { return r.published.Load() }

// Parked returns how many outbox rows this relay has parked: messages the
// broker refused for good (settle dlq list --parked lists them).
func (r *Relay) Parked() int64 { return r.parked.Load() }

// Run publishes the outbox until ctx is done: as the leader, or standing by
// to take over. When ctx is done, a leader makes one last round (bounded by
// FlushTimeout) so that what the consumers settled before they stopped goes
// out, then releases the lease. It returns nil after a requested stop.
func (r *Relay) Run(ctx context.Context) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(r.cfg.Brokers...),
		// Idempotent (franz-go's default) with every in-sync replica: a
		// retried produce is not duplicated and per-partition order holds.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Nothing goes out until a round flushes a part it produced, so
		// that a partition's records of one part are one batch (round).
		kgo.ManualFlushing(),
	}, r.cfg.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("relay: create kafka client: %w", err)
	}
	defer cl.Close()
	batchMax, ok := cl.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32)
	if !ok {
		return errors.New("relay: the Kafka client does not say its batch limit (kgo.ProducerBatchMaxBytesFn)")
	}
	p := producer{outlet.New(cl, outlet.Config{Attempts: 1}), batchMax}

	// Unjittered: a failed lead costs each replica one lease query per
	// wait, too little load for replicas retrying in step to matter.
	b := backoff.New(backoff.Policy{Min: r.cfg.BackoffMin, Max: r.cfg.BackoffMax})
	for ctx.Err() == nil {
		err := r.lead(ctx, p)
		r.leader.Store(false)
		if err == nil || ctx.Err() != nil {
			b.Reset()
			continue
		}
		r.log.Warn("outbox relay failed; retrying", "err", err)
		b.Wait(ctx, nil)
	}
	return nil
}

// lead opens a lease, waits to become the leader, and publishes until ctx
// is done or something fails. It returns nil when it stopped on ctx.
func (r *Relay) lead(ctx context.Context, p producer) error {
	lease, err := r.store.Lease(ctx, r.cfg.LockKey)
	if err != nil {
		return err
	}
	// Closing the lease's session releases the lock whether or not the
	// close itself reports an error.
	defer func() { _ = lease.Close(context.WithoutCancel(ctx)) }()
	for {
		held, err := lease.TryAcquire(ctx)
		if err != nil {
			return err
		}
		if held {
			break
		}
		if !backoff.Sleep(ctx, r.cfg.StandbyInterval, nil) {
			return nil
		}
	}
	r.leader.Store(true)
	r.log.Info("outbox relay is the leader")
	defer r.log.Info("outbox relay stepped down")

	for {
		n, err := r.round(ctx, p, lease)
		if ctx.Err() != nil {
			return r.flush(ctx, p, lease)
		}
		if err != nil {
			return err
		}
		if n < r.cfg.BatchRowsMax && !r.idle(ctx) {
			return r.flush(ctx, p, lease)
		}
	}
}

// idle waits, after a round that found the outbox drained, until a
// transaction of this process writes outbox rows and RoundLinger more has
// passed, or PollInterval passes (rows of other processes). It reports
// false when ctx is done.
func (r *Relay) idle(ctx context.Context) bool {
	t := time.NewTimer(r.cfg.PollInterval)
	defer t.Stop()
	select {
	case <-r.store.Written():
		t.Reset(r.cfg.RoundLinger)
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// flush publishes what is left within FlushTimeout, for a stopping relay.
func (r *Relay) flush(ctx context.Context, p producer, lease *outbox.Lease) error {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.FlushTimeout)
	defer cancel()
	for {
		n, err := r.round(fctx, p, lease)
		if err != nil {
			r.log.Warn("final outbox flush incomplete; the next relay publishes the rest", "err", err)
			return nil
		}
		if n == 0 {
			return nil
		}
	}
}

// round publishes one batch of unpublished rows, marks the ones the broker
// acknowledged and parks the ones it refused for good. It returns how many
// rows it read, and an error when a row is left for a retry.
//
// A row is taken off the queue once it is published, whatever happened to
// its neighbours, so a failing row does not publish the others of its round
// again on every retry. Per-account order holds per topic and key: a row
// left for a retry holds back the later rows of its key in the round (they
// are not produced, or published again after it if the broker already took
// them). A parked row holds back nothing: parking is terminal, and the rows
// after it go on.
//
// The round's rows go to the client in parts (partEnd), each flushed and
// answered before the next (outlet.Outlet.Produce): a partition's rows
// of one part are one batch, which the broker takes or refuses whole, so
// no later row of a key reaches the topic while an earlier one is still to
// be sent again alone.
func (r *Relay) round(ctx context.Context, p producer, lease *outbox.Lease) (int, error) {
	msgs, err := lease.Pending(ctx, r.cfg.BatchRowsMax)
	if err != nil || len(msgs) == 0 {
		return 0, err
	}
	r.rounds.Add(1)
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = &kgo.Record{Topic: m.Topic, Key: m.Key, Value: m.Value, Headers: kafkahdr.ToKafka(m.Headers)}
	}
	// While the broker takes its time (franz-go retries until it is
	// back), the lease is kept: the lock is this relay's until it marks.
	stopKeeping := lease.KeepAlive(ctx)
	spans := r.startSpans(ctx, recs)
	results := make([]error, len(recs))
	o := outcome{held: map[string]bool{}}
	for lo := 0; lo < len(msgs); {
		hi := partEnd(recs, lo, p.batchMax)
		r.publishPart(ctx, p.out, msgs[lo:hi], recs[lo:hi], results[lo:hi], &o)
		lo = hi
	}
	endSpans(spans, results)
	crashpoint.Hit("after_publish_before_mark")
	stopKeeping()
	if err := r.mark(ctx, lease, o.published, o.parks); err != nil {
		return 0, err
	}
	return len(msgs), o.failure
}

// producer is the relay's Kafka client and its batch limit per topic
// (kgo.ProducerBatchMaxBytesFn), which cuts a round into parts (partEnd).
type producer struct {
	out      *outlet.Outlet
	batchMax func(topic string) int32
}

// outcome is what a round's parts have found so far.
type outcome struct {
	published []outbox.Message
	parks     []outbox.Park
	failure   error           // the first row left for a retry
	held      map[string]bool // keys with a row left for a retry (heldKey)
}

// heldKey is what holds a row back: its topic and key.
func heldKey(m outbox.Message) string { return m.Topic + "\x00" + string(m.Key) }

// publishPart produces one part of a round through the outlet (one
// attempt: the outbox row is the retry) and records in o and results what
// became of every row: published, parked (refused for good on its own), or
// left for a retry. A row whose key has an earlier row left for a retry in
// an earlier part is not sent; within the part, the outlet holds such a row
// back (outlet.ErrHeldBack), so it goes again after it.
func (r *Relay) publishPart(ctx context.Context, out *outlet.Outlet, msgs []outbox.Message, recs []*kgo.Record, results []error, o *outcome) {
	send, at := recs, []int(nil)
	if len(o.held) > 0 {
		send = make([]*kgo.Record, 0, len(recs))
		for i, m := range msgs {
			if o.held[heldKey(m)] {
				results[i] = outlet.ErrHeldBack
				continue
			}
			send, at = append(send, recs[i]), append(at, i)
		}
	}
	s, _ := out.Produce(ctx, send...) // each row's outcome is read below
	for j := range send {
		i := j
		if at != nil {
			i = at[j]
		}
		m, err := msgs[i], s.Outcome(j)
		results[i] = err
		var refused *outlet.RefusedError
		switch {
		case err == nil:
			o.published = append(o.published, m)
		case errors.As(err, &refused):
			o.parks = append(o.parks, outbox.Park{ID: m.ID, Reason: refused.Reason, Error: refused.Err.Error()})
			r.log.Warn("outbox row refused for good by the broker; parked", "outbox_row", m.ID, "topic", m.Topic,
				"value_bytes", len(m.Value), "reason", refused.Reason, "err", refused.Err)
		default:
			o.held[heldKey(m)] = true
			if o.failure == nil {
				o.failure = fmt.Errorf("publish outbox row %d to %s: %w", m.ID, m.Topic, err)
			}
		}
	}
}

// mark records a round's outcome under the lease: the rows published and
// the rows parked; a cancelled round still records what the broker took.
func (r *Relay) mark(ctx context.Context, lease *outbox.Lease, published []outbox.Message, parks []outbox.Park) error {
	wctx := context.WithoutCancel(ctx)
	if len(published) > 0 {
		ids := make([]int64, len(published))
		for i, m := range published {
			ids[i] = m.ID
		}
		if err := lease.MarkPublished(wctx, ids); err != nil {
			return err
		}
		r.published.Add(int64(len(ids)))
		r.countPublished(ctx, published)
	}
	if len(parks) > 0 {
		if err := lease.Park(wctx, parks); err != nil {
			return err
		}
		r.parked.Add(int64(len(parks)))
		r.countParked(ctx, parks)
	}
	return nil
}

// recordOverhead is what partEnd counts for a record beyond its key, value
// and headers' bytes (a header counts a quarter of it): more than a record
// batch spends on a record's lengths, offsets and attributes.
const recordOverhead = 64

// partEnd returns the end of the part of recs that starts at lo: at most
// half the client's batch limit of each of its topics (batchMax,
// kgo.ProducerBatchMaxBytesFn: 1,000,012 bytes unless ClientOpts set it),
// so that a partition's records of one part fit one batch. A row larger
// than that is a part of its own.
func partEnd(recs []*kgo.Record, lo int, batchMax func(string) int32) int {
	n, limit := 0, math.MaxInt
	for i := lo; i < len(recs); i++ {
		rec := recs[i]
		limit = min(limit, int(batchMax(rec.Topic))/2)
		size := recordOverhead + len(rec.Key) + len(rec.Value)
		for _, h := range rec.Headers {
			size += len(h.Key) + len(h.Value) + recordOverhead/4
		}
		if n += size; n > limit && i > lo {
			return i
		}
	}
	return len(recs)
}
