package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"go.opentelemetry.io/otel/trace"

	"github.com/settlehq/settle/internal/backoff"
	"github.com/settlehq/settle/internal/crashpoint"
	"github.com/settlehq/settle/internal/kafkahdr"
	"github.com/settlehq/settle/outlet"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/telemetry"
)

// errAbandoned stops work that was waiting out an outage when the group
// wants to rebalance or the consumer is stopping. Nothing it held was
// committed, so the records are read again.
var errAbandoned = errors.New("abandoned while waiting out an outage: the records will be read again")

// errYielded ends a partition's share of a poll between two batches
// because a rebalance waits for the poll or the consumer stops: a poll
// holds up to PollRecordsMax records, and the group (or the stop) would
// otherwise wait for all of them to settle (on a loaded machine, longer
// than the rebalance timeout). What is not settled is read again, by this
// member if it keeps the partition.
var errYielded = errors.New("yielded to a rebalance or a stop between batches: the rest will be read again")

// A lane is the share of a poll that one goroutine settles, in order, in
// batches of at most the store's BatchRecordsMax: one partition's records,
// or, when a poll is small or the lanes are capped (Config.LanesMax), the
// records of several partitions one after the other. A transaction's cost
// is mostly per record only in batches of hundreds: at half the full rate
// six partitions polled separately settle a few dozen records per
// transaction each, and the machine spends twice the CPU per record that
// it does at full rate (BENCHMARKS.md).
type lane struct {
	works []*partitionWork
	recs  []*kgo.Record // the works' records, one partition after the other
}

// laneRecordsMin is the least share of a poll, as a fraction of the
// store's batch size, worth a lane of its own.
const laneRecordsMin = 2

// lanes splits a poll's work into lanes: one per partition when every
// partition has a batch's worth or the poll is large, fewer (at least one
// per laneRecordsMin-th of a batch) when it is small, and never more than
// lanesMax when it is above 0 (Config.LanesMax). Each partition is whole in
// one lane, and lanes are balanced by records.
func lanes(work []*partitionWork, batchMax, lanesMax int) []*lane {
	total := 0
	for _, w := range work {
		total += len(w.records)
	}
	share := max(1, batchMax/laneRecordsMin)
	n := min(len(work), max(1, (total+share-1)/share))
	if lanesMax > 0 {
		n = min(n, lanesMax)
	}
	ls := make([]*lane, n)
	for i := range ls {
		ls[i] = &lane{}
	}
	bySize := slices.Clone(work)
	slices.SortStableFunc(bySize, func(a, b *partitionWork) int { return len(b.records) - len(a.records) })
	for _, w := range bySize {
		l := slices.MinFunc(ls, func(a, b *lane) int { return len(a.recs) - len(b.recs) })
		l.works = append(l.works, w)
		l.recs = append(l.recs, w.records...)
	}
	return ls
}

// handleLane settles a lane's records in batches. Each batch's results are
// produced while the next batch's transaction runs; a partition's progress
// in its partitionWork only moves over batches whose results the broker
// has acknowledged, in order. A partition the lane did not finish gets the
// reason in its err.
func (c *Consumer) handleLane(ctx context.Context, abandon <-chan struct{}, cl *kgo.Client, l *lane) {
	batchMax := c.store.Config().BatchRecordsMax
	var inflight []*batchPublish
	// drain waits for the batches in flight, in order, and moves the
	// progress over each; false when one could not be published.
	drain := func() bool {
		for i, p := range inflight {
			if err := c.awaitPublish(ctx, abandon, p); err != nil {
				for _, q := range inflight[i:] {
					endSpans(q.spans, nil, err)
				}
				l.stop(err)
				return false
			}
			c.count(p.results)
			endSpans(p.spans, p.results, p.err)
			for _, pr := range p.progress {
				pr.w.next, pr.w.epoch = pr.next, pr.epoch
			}
			crashpoint.Hit("mid_batch")
		}
		inflight = inflight[:0]
		return true
	}
	for start := 0; start < len(l.recs); start += batchMax {
		if start > 0 && closed(abandon) {
			if drain() {
				l.stop(errYielded)
			}
			return
		}
		end := min(start+batchMax, len(l.recs))
		recs := l.recs[start:end]
		ins := make([]message.Input, len(recs))
		for i, r := range recs {
			ins[i] = input(r)
		}
		c.store.Decode(ins)
		crashpoint.Hit("after_decode")
		spans := c.startSpans(ctx, recs, ins)
		results, err := c.settleRange(ctx, abandon, ins)
		// results covers a prefix of ins even on error: publish it, so the
		// partitions' progress is kept.
		if len(results) > 0 {
			p := c.publishAsync(ctx, results, spans...)
			p.spans, p.err = spans, err
			p.progress = l.progressOver(recs[:len(results)])
			inflight = append(inflight, p)
		}
		if err != nil {
			if len(results) == 0 {
				endSpans(spans, nil, err)
			}
			if drain() {
				l.stop(err)
			}
			return
		}
	}
	drain()
}

// stop gives every partition of the lane that is not finished the reason.
func (l *lane) stop(err error) {
	for _, w := range l.works {
		if w.next != w.records[len(w.records)-1].Offset+1 {
			w.err = err
		}
	}
}

// progress is how far a batch takes one partition.
type progress struct {
	w     *partitionWork
	next  int64 // the offset after the partition's last record in the batch
	epoch int32 // that record's leader epoch
}

// progressOver returns, per partition of recs (a run of the lane's
// records), the offset after its last record there.
func (l *lane) progressOver(recs []*kgo.Record) []progress {
	var ps []progress
	for _, r := range recs {
		if n := len(ps); n == 0 || ps[n-1].w.topic != r.Topic || ps[n-1].w.partition != r.Partition {
			i := slices.IndexFunc(l.works, func(w *partitionWork) bool { return w.topic == r.Topic && w.partition == r.Partition })
			ps = append(ps, progress{w: l.works[i]})
		}
		ps[len(ps)-1].next, ps[len(ps)-1].epoch = r.Offset+1, r.LeaderEpoch
	}
	return ps
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// input turns a Kafka record into the settlement core's input.
func input(r *kgo.Record) message.Input {
	return message.Input{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value,
		Headers: kafkahdr.FromKafka(r.Headers), Timestamp: r.Timestamp}
}

// settleRange settles ins in order and returns the results of the prefix of
// ins that settled. A batch that fails for a reason other than an outage is
// cut in halves, each settled in its own transaction, left first, so the
// failure is narrowed to one record in log2(len) steps while every record
// before it settles and the partition order is kept.
func (c *Consumer) settleRange(ctx context.Context, abandon <-chan struct{}, ins []message.Input) ([]message.Result, error) {
	results, err := c.settleWaiting(ctx, abandon, ins)
	var be *settle.BatchError
	if err == nil || !errors.As(err, &be) {
		return results, err
	}
	if len(ins) == 1 {
		return c.settleSuspect(ctx, abandon, ins[0], err)
	}
	c.log.Warn("batch failed; bisecting to find the record", "records", len(ins),
		"partition", ins[0].Partition, "first_offset", ins[0].Offset, "err", err)
	mid := len(ins) / 2
	left, err := c.settleRange(ctx, abandon, ins[:mid])
	if err != nil {
		return left, err
	}
	right, err := c.settleRange(ctx, abandon, ins[mid:])
	return append(left, right...), err
}

// settleSuspect settles one record that failed on its own: it retries it
// with backoff up to RecordAttemptsMax attempts in all, then settles it as
// exhausted, which dead-letters it transient_exhausted with the last error
// and the attempt count. If even the dead letter fails, the fault cannot be
// the record's (a dead letter does not look inside it): the consumer
// pauses and starts the record's count again rather than blame it.
func (c *Consumer) settleSuspect(ctx context.Context, abandon <-chan struct{}, in message.Input, firstErr error) ([]message.Result, error) {
	attempts, lastErr := 1, firstErr
	b := backoff.New(c.cfg.retryPolicy())
	for {
		if attempts >= c.cfg.RecordAttemptsMax {
			in.Exhausted = &message.Exhausted{Err: lastErr.Error(), Attempts: attempts}
			res, err := c.settleWaiting(ctx, abandon, []message.Input{in})
			var be *settle.BatchError
			if err == nil {
				c.log.Error("record failed every attempt; dead-lettered transient_exhausted",
					"topic", in.Topic, "partition", in.Partition, "offset", in.Offset, "attempts", attempts, "err", lastErr)
				return res, nil
			}
			if !errors.As(err, &be) {
				return nil, err
			}
			c.log.Error("dead-lettering a failing record failed too: the database refuses every write, not this record; pausing",
				"topic", in.Topic, "partition", in.Partition, "offset", in.Offset, "err", err)
			c.dbDown.Store(true)
			if !b.Wait(ctx, abandon) {
				return nil, errAbandoned
			}
			in.Exhausted, attempts = nil, 0
		} else if !b.Wait(ctx, nil) {
			// Bounded: RecordAttemptsMax waits of at most BackoffMax.
			return nil, ctx.Err()
		}
		res, err := c.settleWaiting(ctx, abandon, []message.Input{in})
		var be *settle.BatchError
		if err == nil {
			return res, nil
		}
		if !errors.As(err, &be) {
			return nil, err
		}
		attempts, lastErr = attempts+1, err
		c.cfg.Metrics.Retry(ctx, telemetry.CauseRecord)
		c.log.Warn("record failed on its own; retrying", "topic", in.Topic, "partition", in.Partition,
			"offset", in.Offset, "attempt", attempts, "of", c.cfg.RecordAttemptsMax, "err", err)
	}
}

// settleWaiting settles one batch, waiting out database outages and
// contention with capped exponential backoff for as long as they last.
// It returns nil, a *settle.BatchError, or why it gave up waiting.
func (c *Consumer) settleWaiting(ctx context.Context, abandon <-chan struct{}, ins []message.Input) ([]message.Result, error) {
	b := backoff.New(c.cfg.retryPolicy())
	for tries := 1; ; tries++ {
		txStart := time.Now()
		results, err := c.store.Settle(ctx, c.cfg.Group, ins)
		c.cfg.Metrics.Transaction(ctx, time.Since(txStart), txResult(err))
		if err == nil {
			c.cfg.Metrics.Batch(ctx, len(ins))
			if c.dbDown.Swap(false) {
				c.log.Info("database available again; resuming")
			}
			return results, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		switch {
		case errors.Is(err, dberr.ErrUnavailable):
			c.cfg.Metrics.Retry(ctx, telemetry.CauseUnavailable)
			if !c.dbDown.Swap(true) || tries%10 == 0 {
				c.log.Warn("database unavailable; pausing and retrying the same batch", "tries", tries, "err", err)
			}
		case errors.Is(err, dberr.ErrContention):
			c.cfg.Metrics.Retry(ctx, telemetry.CauseContention)
			c.log.Info("batch lost too many races; retrying", "err", err)
		default:
			var be *settle.BatchError
			if errors.As(err, &be) {
				return nil, err
			}
			return nil, fmt.Errorf("settle %d records from partition %d offset %d: %w", len(ins), ins[0].Partition, ins[0].Offset, err)
		}
		if !b.Wait(ctx, abandon) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, errAbandoned
		}
	}
}

// batchPublish is one batch's results on their way to the results topic.
type batchPublish struct {
	results  []message.Result
	spans    []trace.Span
	progress []progress // where the batch takes its partitions
	err      error      // why the records after results did not settle
	send     *outlet.Send
}

// HeaderRefused is the one header of a result published without its
// input's key and headers, which made the broker refuse it for good: the
// broker's reason (message_too_large).
const HeaderRefused = "settle_refused"

// resultBytesGuess is the room publishAsync makes for a result's JSON.
const resultBytesGuess = 1024

// publishAsync starts producing one message per result to the results
// topic, keyed like the input record, through the outlet; awaitPublish
// collects the acknowledgements. A waiting result is not produced here:
// the settling transaction put it in the outbox, ahead of the final result
// a later transaction writes, and the relay publishes both in that order.
func (c *Consumer) publishAsync(ctx context.Context, results []message.Result, spans ...trace.Span) *batchPublish {
	p := &batchPublish{results: results}
	recs := make([]*kgo.Record, 0, len(results))
	// One buffer holds the batch's values, each a slice of it: a result is
	// ≈ 1 KB, and grown from nothing each paid its doublings.
	buf := make([]byte, 0, resultBytesGuess*len(results))
	for i := range results {
		if results[i].Outcome == message.OutcomeWaiting {
			continue
		}
		start := len(buf)
		buf = results[i].AppendJSON(buf)
		v := buf[start:len(buf):len(buf)]
		r := &kgo.Record{Topic: c.cfg.ResultsTopic, Key: results[i].Key, Value: v}
		if i < len(spans) {
			injectResult(spans[i], r)
		}
		recs = append(recs, r)
	}
	p.send = c.out.Start(ctx, recs...)
	return p
}

// awaitPublish waits for a batch's acknowledgements; the outlet produces
// what failed again, with the consumer's backoff, while the broker is
// unavailable. A retry may publish a result twice; results are idempotent
// repeats. A result the broker refuses for good is refusedResult's.
func (c *Consumer) awaitPublish(ctx context.Context, abandon <-chan struct{}, p *batchPublish) error {
	switch err := p.send.Wait(ctx, abandon); {
	case errors.Is(err, outlet.ErrAbandoned):
		return errAbandoned
	case err != nil:
		return err
	}
	if c.brokerDown.Swap(false) {
		c.log.Info("broker available again; resuming")
	}
	return nil
}

// newOutlet is the consumer's way out for its results, on cl: the consumer's
// backoff between attempts, each bounded by ProduceTimeout.
func (c *Consumer) newOutlet(cl *kgo.Client) *outlet.Outlet {
	return outlet.New(cl, outlet.Config{
		Retry:          c.cfg.retryPolicy(),
		AttemptTimeout: c.cfg.ProduceTimeout,
		Refused:        c.refusedResult,
		Retrying: func(left int, err error) {
			c.cfg.Metrics.Retry(context.Background(), telemetry.CauseBroker)
			if !c.brokerDown.Swap(true) {
				c.log.Warn("publishing results failed; pausing and retrying", "topic", c.cfg.ResultsTopic, "failed", left, "err", err)
			}
		},
	})
}

// refusedResult is the consumer's policy for a result the broker refuses
// for good on its own (the input's key or headers made it too large): it
// is published without them, its header settle_refused naming why; should
// that be refused too, it is logged as an error and left: one record must
// not stop its partition.
func (c *Consumer) refusedResult(rec *kgo.Record, reason string, err error) *kgo.Record {
	if len(rec.Headers) == 1 && rec.Headers[0].Key == HeaderRefused {
		c.log.Error("the broker refuses a result even without its key and headers; it is not on the results topic",
			"topic", rec.Topic, "bytes", len(rec.Value), "err", err)
		return nil
	}
	c.log.Warn("the broker refuses a result for good; publishing it without its key and headers",
		"topic", rec.Topic, "key_bytes", len(rec.Key), "headers", len(rec.Headers), "err", err)
	return &kgo.Record{Topic: rec.Topic, Value: rec.Value,
		Headers: []kgo.RecordHeader{{Key: HeaderRefused, Value: []byte(reason)}}}
}

// txResult names a settling transaction's result for the latency metric.
func txResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, dberr.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, dberr.ErrContention):
		return "contention"
	}
	return "error"
}
