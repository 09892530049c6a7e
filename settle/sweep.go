package settle

import (
	"context"
	"fmt"
	"time"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/internal/state"
	"github.com/settlehq/settle/settle/message"
)

// sweepPageMax bounds the work of one sweep transaction.
const sweepPageMax = 200

// SweepOrphans handles operations that waited for their target longer than
// orphanAfter: a capture is charged as plain usage; any other operation
// opens a conflict case of reason orphan (it stays matchable: when its
// target arrives it is applied and the case closes as auto_resolved). Each
// gets its final result on the results topic. It returns how many it
// handled; call it until it returns 0.
func (s *Store) SweepOrphans(ctx context.Context, orphanAfter time.Duration) (int, error) {
	return s.sweep(ctx, func(st *txState) (int, error) { return st.sweepOrphans(ctx, orphanAfter) })
}

// sweep runs one page of a sweep in a settling transaction (transact), with
// its retries; page returns how many it handled, and 0 writes nothing.
func (s *Store) sweep(ctx context.Context, page func(st *txState) (int, error)) (int, error) {
	var n int
	locks := state.PeriodLocks{}
	err := s.withRetries(ctx, sweepPageMax, func(int) error {
		return s.transact(ctx, 1, s.now(), locks, "", false, func(st *txState) (bool, error) {
			var err error
			n, err = page(st)
			return n > 0, err
		})
	})
	return n, err
}

func (st *txState) sweepOrphans(ctx context.Context, orphanAfter time.Duration) (int, error) {
	due, err := db.On(st.Tx).WaitingDue(ctx, db.WaitingDueParams{OlderThanMs: orphanAfter.Milliseconds(), MaxRows: sweepPageMax})
	if err != nil {
		return 0, err
	}
	var ds []state.Item
	for _, w := range due {
		id := record.Identity{TenantID: w.TenantID, AccountPeriod: w.AccountPeriod, RecordID: w.RecordID, Operation: record.Kind(w.Operation)}
		// Stand-ins: State.Load finds the waiting operations by identity.
		ds = append(ds, state.Item{In: &message.Input{Topic: "settle.sweep"}, ID: id, Rec: record.Record{TenantID: id.TenantID,
			AccountPeriod: id.AccountPeriod, RecordID: id.RecordID, Kind: id.Operation}})
	}
	if len(ds) == 0 {
		return 0, nil
	}
	if err := st.Load(ctx, ds, nil); err != nil {
		return 0, err
	}
	for _, d := range ds {
		w := st.WaitingByID[d.ID]
		if w == nil || w.Status != "waiting" {
			continue
		}
		final := message.Result{Version: message.SchemaVersionOutput, Source: w.Item.In.Coordinates()}
		idj := message.IdentityOf(w.Item.ID)
		final.Identity = &idj
		if w.Item.Rec.Kind == record.KindUsage && w.Item.Rec.HoldID != "" {
			// A capture whose hold never came is charged as plain usage.
			w.Item.Rec.HoldID, w.Item.Rec.HoldPeriod = "", ""
			p, err := st.process(ctx, w.Item)
			if err != nil {
				return 0, err
			}
			w.Status, w.Dirty = "applied", true
			final.Outcome, final.Reason, final.Response = p.Outcome, p.Reason, p.Response
		} else {
			caseID, err := st.openCase(ctx, w.Item, message.ReasonOrphan, 0, nil, w.Canonical,
				fmt.Sprintf("its target %s of period %s has not settled after %s", w.Target.Record, w.Target.Period, orphanAfter))
			if err != nil {
				return 0, err
			}
			w.Status, w.CaseID, w.Dirty = "orphaned", caseID, true
			final.Outcome, final.Reason, final.CaseID = message.OutcomeQuarantined, message.ReasonOrphan, caseID
		}
		st.queueResult(w.Item.In.Key, final)
	}
	return len(ds), nil
}

// ExpireHolds releases active holds whose expires_at has passed, each as its
// own settlement (identity: the hold's, operation expire), published like
// any other. Transactions that look at an account's funds release its
// expired holds too; this catches the ones nobody looks at. It returns how
// many it released; call it until it returns 0.
func (s *Store) ExpireHolds(ctx context.Context) (int, error) {
	return s.sweep(ctx, func(st *txState) (int, error) { return st.expireHolds(ctx) })
}

func (st *txState) expireHolds(ctx context.Context) (int, error) {
	tx := st.Tx
	due, err := db.On(tx).HoldDue(ctx, sweepPageMax)
	if err != nil {
		return 0, err
	}
	var holdIDs, accIDs []int64
	for _, h := range due {
		holdIDs, accIDs = append(holdIDs, h.IdentityID), append(accIDs, h.AccountID)
	}
	if len(holdIDs) == 0 {
		return 0, nil
	}
	// Periods, accounts, then holds: the order every settling transaction
	// locks in. The first attempt holds no period lock; the expiries ask for
	// their holds' periods, and the next attempt takes them.
	p := pgq.NewPipeline(tx)
	defer p.Close() // for the early returns; the last step is Send
	q := db.New(p)
	lockRows := st.QueueLocks(ctx, q)
	accounts := state.QueueAccountsByID(ctx, q, accIDs)
	holds := q.HoldLock(ctx, []db.HoldLockParams{{IdentityIds: holdIDs, ExpiringAccountIds: []int64{}}})
	if err := st.ReadLocks(lockRows); err != nil {
		return 0, err
	}
	if err := st.ReadAccounts(accounts, -1); err != nil {
		return 0, err
	}
	if err := st.ReadHolds(holds); err != nil {
		return 0, err
	}
	if err := p.Send(ctx); err != nil {
		return 0, err
	}
	if st.Now, err = db.On(tx).Now(ctx); err != nil {
		return 0, fmt.Errorf("read the clock: %w", err)
	}
	n := 0
	for _, h := range st.Holds {
		h.Account = st.AccountsByID[h.AccountID]
		if h.Status == "active" && h.ExpiresAt != nil && !h.ExpiresAt.After(st.Now) {
			if err := st.expireIfDue(ctx, h); err != nil {
				return 0, err
			}
			n++
		}
	}
	return n, nil
}

// WakeWaiting applies operations that still wait although their target has
// settled, in one transaction per page of targets, as the target's own
// transaction would have (final result on the results topic). The period
// locks make that case impossible between settle's own transactions; this
// is the safety net that finds any such operation anyway (a database
// restored or edited by hand, a defect) within one sweep. It returns how
// many operations it applied; call it until it returns 0.
func (s *Store) WakeWaiting(ctx context.Context) (int, error) {
	return s.sweep(ctx, func(st *txState) (int, error) { return st.wakeWaiting(ctx) })
}

func (st *txState) wakeWaiting(ctx context.Context) (int, error) {
	targets, err := db.On(st.Tx).WaitingWakeable(ctx, sweepPageMax)
	if err != nil {
		return 0, fmt.Errorf("find waiting operations whose target settled: %w", err)
	}
	keys := make([]state.RecKey, len(targets))
	for i, t := range targets {
		keys[i] = state.RecKey{Tenant: t.TenantID, Period: t.TargetPeriod, Record: t.TargetRecordID}
	}
	if len(keys) == 0 {
		return 0, nil
	}
	if err := st.Load(ctx, nil, keys); err != nil {
		return 0, err
	}
	applied := 0
	for _, k := range keys {
		if err := st.wake(ctx, k); err != nil {
			return 0, err
		}
		for _, w := range st.WaitingByTarget[k] {
			if w.Status == "applied" {
				applied++
			}
		}
	}
	// 0 (targets that still cannot take their operations, none known
	// today): nothing to write, and the sweeper moves on.
	return applied, nil
}
