package outlet

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/backoff"
)

// refusalsMax bounds the records Refused puts in place of one record: an
// owner's policy that keeps offering records the broker refuses ends with
// the last one left.
const refusalsMax = 4

// The states of a position while Wait retries.
const (
	posTaken  uint8 = iota // the broker took its latest record
	posAgain               // to be produced again
	posLeft                // left for good (refused) or held back
	posResent              // taken alone in this pass, after later records of its key
)

// retry applies the policies to the records an attempt did not get taken
// (failed, in order) and makes the attempts left. It runs only when a
// record failed: the positions' states and keys cost nothing otherwise.
func (s *Send) retry(ctx context.Context, abandon <-chan struct{}, failed []failure) error {
	s.recs = slices.Clone(s.recs) // the owner's slice stays as it was given
	s.out = make([]error, len(s.recs))
	st := make([]uint8, len(s.recs))
	b := backoff.New(s.o.cfg.Retry)
	for attempt := 1; ; attempt++ {
		var again []int
		var outage error
		for _, f := range failed {
			s.out[f.i], st[f.i] = f.err, posAgain
			if RefusedForGood(f.err) == "" {
				again, outage = append(again, f.i), f.err
				continue
			}
			switch replaced, err := s.alone(ctx, f.i); {
			case err == nil && replaced:
				// What took its place is another record (a result without
				// its key): it has no place in the key's order.
				s.out[f.i], st[f.i] = nil, posTaken
			case err == nil:
				s.out[f.i], st[f.i] = nil, posResent
			case RefusedForGood(err) != "":
				s.out[f.i], st[f.i] = err, posLeft
			default:
				s.out[f.i] = err
				again, outage = append(again, f.i), err
			}
		}
		last := s.o.cfg.Attempts > 0 && attempt >= s.o.cfg.Attempts
		again = s.keepKeyOrder(st, again, last)
		if len(again) == 0 {
			return nil
		}
		if last {
			return fmt.Errorf("%d records not taken after %d attempts: %w", len(again), attempt, s.out[again[0]])
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if outage != nil {
			if s.o.cfg.Retrying != nil {
				s.o.cfg.Retrying(len(again), outage)
			}
			if !b.Wait(ctx, abandon) {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return ErrAbandoned
			}
		}
		copies := make([]*kgo.Record, len(again))
		for j, i := range again {
			copies[j] = fresh(s.recs[i])
			s.recs[i], s.out[i], st[i] = copies[j], nil, posTaken
		}
		fs := s.o.start(ctx, copies).wait(s.o)
		failed = make([]failure, len(fs))
		for j, f := range fs {
			failed[j] = failure{again[f.i], f.err}
		}
	}
}

// alone produces position i's record in a batch of its own, so that the
// broker's answer is about it; refused, it asks the owner's Refused what
// takes its place and produces that. It returns whether a replacement was
// produced, and nil when the broker took what it produced last, a
// *RefusedError when the record is left, or the error a retry may cure.
func (s *Send) alone(ctx context.Context, i int) (replaced bool, err error) {
	rec := s.recs[i]
	for n := 0; ; n++ {
		one := fresh(rec)
		s.recs[i] = one
		fs := s.o.start(ctx, []*kgo.Record{one}).wait(s.o)
		if len(fs) == 0 {
			return n > 0, nil
		}
		err := fs[0].err
		reason := RefusedForGood(err)
		if reason == "" {
			return n > 0, err
		}
		var instead *kgo.Record
		if s.o.cfg.Refused != nil && n < refusalsMax {
			instead = s.o.cfg.Refused(rec, reason, err)
		}
		if instead == nil {
			return n > 0, &RefusedError{Reason: reason, Err: err}
		}
		rec = instead
	}
}

// keepKeyOrder adds to again (positions to produce again, or just produced
// alone) every later position of the same topic and key the broker took:
// produced again after them, or, on the last attempt, held back. It returns
// again in order.
func (s *Send) keepKeyOrder(st []uint8, again []int, last bool) []int {
	first := map[string]int{}
	for i, state := range st {
		if state != posAgain && state != posResent {
			continue
		}
		k := orderKey(s.recs[i])
		if _, ok := first[k]; !ok {
			first[k] = i
		}
	}
	defer func() {
		for i, state := range st {
			if state == posResent {
				st[i] = posTaken // went out in order with the ones before it
			}
		}
	}()
	if len(first) == 0 {
		return again
	}
	for i, state := range st {
		if state != posTaken {
			continue
		}
		if j, ok := first[orderKey(s.recs[i])]; !ok || j >= i {
			continue
		}
		if _, resent := slices.BinarySearch(again, i); resent {
			continue
		}
		if last {
			s.out[i], st[i] = ErrHeldBack, posLeft
			continue
		}
		st[i] = posAgain
		again = append(again, i)
	}
	slices.Sort(again)
	return again
}

// orderKey is what a record keeps its order within: its topic and key.
func orderKey(r *kgo.Record) string { return r.Topic + "\x00" + string(r.Key) }

// fresh is a copy of r to produce again: a record handed to the client once
// carries that attempt's state.
func fresh(r *kgo.Record) *kgo.Record {
	return &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers}
}
