package settle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/backoff"
	"github.com/settlehq/settle/internal/crashpoint"
	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/state"
	"github.com/settlehq/settle/settle/message"
)

// Settle settles a batch of input records in one transaction and returns one
// result per input, in order. The results equal those of handling the
// records one at a time in order: a duplicate or a conflict inside the batch
// is caught too. group, when not empty, names the consumer group whose
// offsets the transaction records (the next offset per partition).
//
// A record that waits for its target gets the result `waiting`; its final
// result is written to the results topic through the outbox when it is
// applied, in its target's transaction.
//
// Contention is retried here. A database outage returns an error wrapping
// ErrUnavailable (retry the same batch later: it never settles twice). Any
// other failure is a *BatchError.
func (s *Store) Settle(ctx context.Context, group string, inputs []message.Input) ([]message.Result, error) {
	return s.SettleWith(ctx, group, inputs, nil)
}

// SettleWith is Settle with rider's work in the same transaction (Rider):
// the inputs rider does not settle get a zero result.
func (s *Store) SettleWith(ctx context.Context, group string, inputs []message.Input, rider Rider) ([]message.Result, error) {
	if len(inputs) == 0 {
		return nil, nil
	}
	if len(inputs) > s.cfg.BatchRecordsMax {
		return nil, fmt.Errorf("settle: batch of %d records is more than the %d-record limit", len(inputs), s.cfg.BatchRecordsMax)
	}
	firstSeen := s.now()
	ds := make([]state.Item, len(inputs))
	for i := range inputs {
		in := &inputs[i]
		if in.Decoded == nil && !in.Undecoded() {
			return nil, fmt.Errorf("settle: input %d (%s/%d@%d) is not decoded: decode inputs first (Store.Decode)", i, in.Topic, in.Partition, in.Offset)
		}
		ds[i] = state.ItemOf(in, in.Decoded)
	}
	var results []message.Result
	locks := state.PeriodLocks{}
	err := s.withRetries(ctx, len(inputs), func(attempt int) error {
		var err error
		results, err = s.attempt(ctx, group, ds, attempt, firstSeen, locks, rider)
		return err
	})
	return results, err
}

// contentionBackoff is the wait between attempts of a batch that lost a
// race: short (the race is over in a transaction's time), and jittered by
// half either way so racing batches fall out of step.
var contentionBackoff = backoff.Policy{Min: time.Millisecond, Max: 100 * time.Millisecond,
	Jitter: backoff.Jitter{Below: 0.5, Above: 0.5}}

// withRetries runs one transaction attempt after another while they lose
// races, with jittered capped backoff, and classifies the final error.
func (s *Store) withRetries(ctx context.Context, records int, attempt func(n int) error) error {
	b := backoff.New(contentionBackoff)
	for n := 1; ; n++ {
		err := attempt(n)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, state.ErrWidenLocks) {
			// Not a race lost: the next attempt holds more locks, and the
			// set only grows, so this ends.
			n--
			continue
		}
		switch c := dberr.Classify(err); {
		case errors.Is(c, dberr.ErrContention):
			if n >= s.cfg.ContentionRetriesMax {
				return fmt.Errorf("settle batch of %d records: %w after %d attempts: %w", records, dberr.ErrContention, n, err)
			}
			if !b.Wait(ctx, nil) {
				return ctx.Err()
			}
		case errors.Is(c, dberr.ErrUnavailable):
			return fmt.Errorf("settle batch of %d records: %w: %w", records, dberr.ErrUnavailable, err)
		default:
			return &BatchError{Records: records, Err: err}
		}
	}
}

// Decode decodes, with the store's decoder (its Config.Decoder), every
// input that is not decoded yet, so that it can be settled. The consumer
// calls it as a poll's records become inputs; tools and tests that build
// inputs by hand call it before Settle.
func (s *Store) Decode(ins []message.Input) []message.Input {
	for i := range ins {
		if ins[i].Decoded == nil && !ins[i].Undecoded() {
			p := fingerprint.Prepare(s.shared.Decoder, ins[i].Value, ins[i].Headers)
			ins[i].Decoded = &p
		}
	}
	return ins
}

// attempt runs one transaction attempt over the whole batch.
func (s *Store) attempt(ctx context.Context, group string, ds []state.Item, attempt int, firstSeen time.Time,
	locks state.PeriodLocks, rider Rider) ([]message.Result, error) {
	results := make([]message.Result, len(ds))
	err := s.transact(ctx, attempt, firstSeen, locks, group, true, func(st *txState) (bool, error) {
		items, at := ds, []int(nil) // at[k]: the input of items[k], when not all settle
		if rider != nil {
			var err error
			if items, at, err = ridden(ctx, st.Tx, rider, ds); err != nil || len(items) == 0 {
				return false, err
			}
		}
		if err := st.Load(ctx, items, nil); err != nil {
			return false, err
		}
		for k := range items {
			r, err := st.handle(ctx, &items[k])
			if err != nil {
				return false, err
			}
			if at != nil {
				results[at[k]] = r
			} else {
				results[k] = r
			}
		}
		caseIDs, err := st.openPendingCases(ctx)
		if err != nil {
			return false, err
		}
		for i := range ds {
			if id, ok := caseIDs[ds[i].In]; ok {
				results[i].CaseID = id
			}
		}
		if rider != nil {
			st.writeRider = func(p *pgq.Pipeline) error { return rider.QueueWrite(ctx, p, results) }
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// ridden runs rider's first round trip in tx and returns the items of ds
// it settles, and the index in ds of each.
func ridden(ctx context.Context, tx *pgq.Tx, rider Rider, ds []state.Item) (items []state.Item, at []int, err error) {
	p := pgq.NewPipeline(tx)
	defer p.Close() // for the early return; the last step is Send
	rider.QueueFirst(ctx, p)
	if err := rider.ReadFirst(); err != nil {
		return nil, nil, err
	}
	if err := p.Send(ctx); err != nil {
		return nil, nil, err
	}
	for i := range ds {
		if rider.Settles(i) {
			items, at = append(items, ds[i]), append(at, i)
		}
	}
	return items, at, nil
}

// transact runs one transaction attempt, the one frame of every settling
// transaction (a batch, a sweep, a resolution): act loads and decides on
// st; unless it returns false (nothing to write), the period locks its
// decisions asked for are checked, its rows written, group's offsets with
// them, and the transaction committed. A batch's commit passes the crash
// points before_commit and after_commit (internal/crashpoint); a sweep's
// or a resolution's does not, so that a point's hits count batches.
func (s *Store) transact(ctx context.Context, attempt int, firstSeen time.Time, locks state.PeriodLocks, group string,
	batch bool, act func(st *txState) (bool, error)) (err error) {
	tx, err := pgq.Begin(ctx, s.pool)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	st := &txState{State: state.New(s.shared, tx, attempt, firstSeen, s.now(), locks), s: s}
	st.Group = group
	defer func() { s.shared.Accounts.ForgetStale(st.State, err, time.Now()) }()
	write, err := act(st)
	if err == nil {
		err = st.Stale
	}
	if err != nil || !write {
		return err
	}
	if err = st.CheckLocks(); err != nil {
		return err
	}
	p, err := st.Write(ctx, group)
	if err != nil {
		return err
	}
	if st.writeRider != nil {
		if err = st.writeRider(p); err != nil {
			p.Close()
			return err
		}
	}
	if batch {
		crashpoint.Hit("before_commit")
	}
	if err = s.commit(ctx, tx, st.State, p); err != nil {
		return err
	}
	if batch {
		crashpoint.Hit("after_commit")
	}
	s.shared.Accounts.Learn(st.State, time.Now())
	s.shared.Offsets.Learn(group, st.Offsets)
	return nil
}
