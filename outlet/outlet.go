// Package outlet is the service's one way out to Kafka: every record the
// service produces goes through it — the consumer's results, the relay's
// settlements, dead letters and waiting results, the dead letters an
// operator replays, and the lines settle produce publishes. It owns how
// records are handed to a client and answered for, what is tried again,
// and what becomes of a record the broker refuses for good. It never
// decides what a record says or where it goes, and it opens no client: each
// owner brings its own (the consumer produces on the client it consumes
// with; the relay on one that flushes by hand, so that a part of a round is
// one batch per partition).
//
// One retry policy: a record the broker did not take for a reason a retry
// may cure (an outage, a timeout, a broker that did not answer) is
// produced again, a fresh copy, after Config.Retry's backoff, in the order
// it was given, until the broker takes it or its owner stops waiting
// (Wait's context or abandon). An owner that keeps its records until they
// are published (the relay's outbox rows) makes one attempt
// (Config.Attempts 1): its next round is its retry.
//
// One refusal policy: the broker refuses a whole batch for one record it
// will not take, and fails every record of the partition behind it, so a
// record refused for good (RefusedForGood) is first produced alone, where
// the broker's answer is about it. Taken alone, it only stood next to the
// refused one. Refused alone, it goes to the owner's Config.Refused, which
// returns what takes its place or nil; nil leaves it with a *RefusedError
// outcome that the owner reads (Send.Outcome). Per kind of output:
//   - results (consumer): the same value without the input's key and
//     headers, its header settle_refused naming why; refused again too, it
//     is logged and left;
//   - outbox rows (relay): nothing; the relay parks the row;
//   - replayed dead letters (service) and settle produce's lines: nothing;
//     the error goes to the operator, and the dead letter or line stays.
//
// A refused record therefore holds back nothing behind it, and neither does
// an outage of one partition hold another. The order of a key holds: a
// record produced again goes out before any later record of its key (topic
// and key) given in the same Send, and a later record of that key the broker
// took meanwhile is produced again after it (a repeat: every output of the
// service is idempotent to its readers), or, when no attempt is left,
// counted as not taken (ErrHeldBack).
package outlet

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/backoff"
)

// Refused is an owner's policy for a record the broker refused for good on
// its own, for reason (RefusedForGood): it returns the record to produce in
// its place, or nil to leave it (its outcome a *RefusedError).
type Refused func(rec *kgo.Record, reason string, err error) (instead *kgo.Record)

// Config is an owner's use of the outlet. The zero value makes attempts
// without end, bounded by the owner's context only, and leaves a refused
// record with a *RefusedError.
type Config struct {
	// Retry is the backoff before each new attempt at the records the
	// broker did not take for a reason a retry may cure.
	Retry backoff.Policy

	// Attempts bounds the attempts at a record. 0 = until the broker takes
	// it or the owner stops waiting.
	Attempts int

	// AttemptTimeout bounds one attempt: a record not answered by then is
	// failed, and tried again. 0 = the owner's context only.
	AttemptTimeout time.Duration

	// Refused says what takes the place of a record the broker refused for
	// good. nil = nothing.
	Refused Refused

	// Retrying is told, before each wait for a new attempt, how many
	// records are left and why the last failed (the owner's metric and
	// log). nil = nothing.
	Retrying func(left int, err error)
}

// Outlet produces records on one client with the policies of the package.
// It is safe for concurrent use: each Send is its own.
type Outlet struct {
	cl     *kgo.Client
	cfg    Config
	manual bool // the client flushes by hand (kgo.ManualFlushing)
}

// New returns an outlet over cl.
func New(cl *kgo.Client, cfg Config) *Outlet {
	manual, _ := cl.OptValue(kgo.ManualFlushing).(bool)
	return &Outlet{cl: cl, cfg: cfg, manual: manual}
}

// ErrAbandoned is Wait's error when abandon closed while it waited out an
// outage.
var ErrAbandoned = errors.New("abandoned while waiting out an outage")

// ErrUnanswered is the outcome of a record the broker did not answer for
// within unansweredWait after the attempt's context ended (its request in
// flight to a broker that does not answer, or retried against one that is
// gone): not known to be taken, so left for a retry, a repeat if the broker
// did take it.
var ErrUnanswered = errors.New("no answer from the broker before the attempt ended")

// ErrHeldBack is the outcome of a record the broker took while an earlier
// record of its key was left, when no attempt is left to send it again
// after that one: it is counted as not taken, so that it goes after it.
var ErrHeldBack = errors.New("held back behind an earlier record of its key")

// unansweredWait is how long an attempt whose context ended waits for the
// broker to answer what it had sent.
const unansweredWait = 2 * time.Second

// Send is records on their way out: Start hands them to the client, Wait
// collects the broker's answers and applies the policies.
type Send struct {
	o    *Outlet
	recs []*kgo.Record // the record of each position's latest attempt
	a    *attempt
	out  []error // each position's outcome, once a record failed (nil on the fast path)
}

// Start hands recs to the client, in order, and returns at once. The
// records are the client's from now on: an owner reads them again only
// through Record after Wait.
func (o *Outlet) Start(ctx context.Context, recs ...*kgo.Record) *Send {
	s := &Send{o: o, recs: recs}
	s.a = o.start(ctx, recs)
	return s
}

// Wait returns once every record is taken, or left for good by the
// policies (refused, or out of attempts), or the owner stopped waiting: ctx
// ended (ctx.Err()) or abandon closed (ErrAbandoned) while it waited out an
// outage. It returns nil when nothing was left for a retry: a record
// refused for good and left by Refused is not an error here (Outcome says
// it).
func (s *Send) Wait(ctx context.Context, abandon <-chan struct{}) error {
	failed := s.a.wait(s.o)
	if len(failed) == 0 {
		return nil
	}
	return s.retry(ctx, abandon, failed)
}

// Outcome is what became of the record at position i, once Wait returned:
// nil when the broker took it (or what Refused put in its place), a
// *RefusedError when it was refused for good and left, or the error that
// left it for a retry.
func (s *Send) Outcome(i int) error {
	if s.out == nil {
		return nil
	}
	return s.out[i]
}

// Record is the record last produced for position i: its partition and
// offset are where it landed when Outcome(i) is nil.
func (s *Send) Record(i int) *kgo.Record { return s.recs[i] }

// Produce hands recs to the client and waits for them (Start, Wait with
// no abandon): the outcome of each is in the Send returned.
func (o *Outlet) Produce(ctx context.Context, recs ...*kgo.Record) (*Send, error) {
	s := o.Start(ctx, recs...)
	return s, s.Wait(ctx, nil)
}

// failure is a record an attempt did not get taken: its position in the
// attempt and why.
type failure struct {
	i   int
	err error
}

// The states of a record in an attempt.
const (
	pending uint32 = iota
	taken
	failed
	unanswered
)

// attempt is one hand-over of records to the client and the broker's
// answers. A record's state moves once from pending (compare and swap), so
// that an answer after the attempt gave up on it changes nothing; a record
// taken costs an atomic store and a decrement.
type attempt struct {
	state  []atomic.Uint32
	left   atomic.Int64
	all    chan struct{} // closed when the last record is answered
	ctx    context.Context
	cancel context.CancelFunc // ends ctx: at the last answer, or when wait gives up

	mu     sync.Mutex
	failed []failure
}

func (o *Outlet) start(ctx context.Context, recs []*kgo.Record) *attempt {
	a := &attempt{state: make([]atomic.Uint32, len(recs)), all: make(chan struct{})}
	a.left.Store(int64(len(recs)))
	if o.cfg.AttemptTimeout > 0 {
		a.ctx, a.cancel = context.WithTimeout(ctx, o.cfg.AttemptTimeout)
	} else {
		a.ctx, a.cancel = context.WithCancel(ctx)
	}
	if len(recs) == 0 {
		close(a.all)
		a.cancel()
		return a
	}
	for i, r := range recs {
		o.cl.Produce(a.ctx, r, func(_ *kgo.Record, err error) { a.answer(i, err) })
	}
	return a
}

func (a *attempt) answer(i int, err error) {
	if err == nil {
		if !a.state[i].CompareAndSwap(pending, taken) {
			return
		}
	} else {
		a.mu.Lock()
		ok := a.state[i].CompareAndSwap(pending, failed)
		if ok {
			a.failed = append(a.failed, failure{i, err})
		}
		a.mu.Unlock()
		if !ok {
			return
		}
	}
	if a.left.Add(-1) == 0 {
		close(a.all)
		a.cancel()
	}
}

// wait flushes (a client that flushes by hand) and waits for every answer,
// or for the attempt's context to end and unansweredWait more; it returns
// the records not taken, in the order they were given.
func (a *attempt) wait(o *Outlet) []failure {
	if o.manual {
		_ = o.cl.Flush(a.ctx) // returns early when the attempt ends; what it did not send is aborted below
	}
	select {
	case <-a.all:
	case <-a.ctx.Done():
		actx, cancel := context.WithTimeout(context.Background(), unansweredWait)
		if o.manual {
			_ = o.cl.AbortBufferedRecords(actx) // returns when actx ends if a request stays unanswered
		}
		select {
		case <-a.all:
		case <-actx.Done():
		}
		cancel()
	}
	a.cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.state {
		if a.state[i].CompareAndSwap(pending, unanswered) {
			a.failed = append(a.failed, failure{i, ErrUnanswered})
		}
	}
	slices.SortFunc(a.failed, func(x, y failure) int { return x.i - y.i })
	return a.failed
}
