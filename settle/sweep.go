package settle

import (
	"context"
	"fmt"
	"time"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
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
	locks := periodLocks{}
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
	due, err := db.On(st.tx).WaitingDue(ctx, db.WaitingDueParams{OlderThanMs: orphanAfter.Milliseconds(), MaxRows: sweepPageMax})
	if err != nil {
		return 0, err
	}
	var ds []decoded
	for _, w := range due {
		id := record.Identity{TenantID: w.TenantID, AccountPeriod: w.AccountPeriod, RecordID: w.RecordID, Operation: record.Kind(w.Operation)}
		// Stand-ins: load() finds the waiting operations by identity.
		ds = append(ds, decoded{in: &Input{Topic: "settle.sweep"}, id: id, rec: record.Record{TenantID: id.TenantID,
			AccountPeriod: id.AccountPeriod, RecordID: id.RecordID, Kind: id.Operation}})
	}
	if len(ds) == 0 {
		return 0, nil
	}
	if err := st.load(ctx, ds, nil); err != nil {
		return 0, err
	}
	for _, d := range ds {
		w := st.waitingByID[d.id]
		if w == nil || w.status != "waiting" {
			continue
		}
		final := message.Result{Version: message.SchemaVersionOutput, Source: w.d.in.coordinates()}
		idj := message.IdentityOf(w.d.id)
		final.Identity = &idj
		if w.d.rec.Kind == record.KindUsage && w.d.rec.HoldID != "" {
			// A capture whose hold never came is charged as plain usage.
			w.d.rec.HoldID, w.d.rec.HoldPeriod = "", ""
			p, err := st.process(ctx, w.d)
			if err != nil {
				return 0, err
			}
			w.status, w.dirty = "applied", true
			final.Outcome, final.Reason, final.Response = p.Outcome, p.Reason, p.Response
		} else {
			caseID, err := st.openCase(ctx, w.d, message.ReasonOrphan, 0, nil, w.canonical,
				fmt.Sprintf("its target %s of period %s has not settled after %s", w.target.record, w.target.period, orphanAfter))
			if err != nil {
				return 0, err
			}
			w.status, w.caseID, w.dirty = "orphaned", caseID, true
			final.Outcome, final.Reason, final.CaseID = message.OutcomeQuarantined, message.ReasonOrphan, caseID
		}
		st.queueResult(w.d.in.Key, final)
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
	tx := st.tx
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
	p := db.NewPipeline(tx)
	defer p.Close() // for the early returns; the last step is Send
	q := db.New(p)
	lockRows := st.queueLocks(ctx, q)
	accounts := queueAccountsByID(ctx, q, accIDs)
	holds := q.HoldLock(ctx, []db.HoldLockParams{{IdentityIds: holdIDs, ExpiringAccountIds: []int64{}}})
	if err := st.readLocks(lockRows); err != nil {
		return 0, err
	}
	if err := st.readAccounts(accounts, -1); err != nil {
		return 0, err
	}
	if err := st.readHolds(holds); err != nil {
		return 0, err
	}
	if err := p.Send(ctx); err != nil {
		return 0, err
	}
	if st.now, err = db.On(tx).Now(ctx); err != nil {
		return 0, fmt.Errorf("read the clock: %w", err)
	}
	n := 0
	for _, h := range st.holds {
		h.a = st.accountsByID[h.accountID]
		if h.status == "active" && h.expiresAt != nil && !h.expiresAt.After(st.now) {
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
	targets, err := db.On(st.tx).WaitingWakeable(ctx, sweepPageMax)
	if err != nil {
		return 0, fmt.Errorf("find waiting operations whose target settled: %w", err)
	}
	keys := make([]recKey, len(targets))
	for i, t := range targets {
		keys[i] = recKey{t.TenantID, t.TargetPeriod, t.TargetRecordID}
	}
	if len(keys) == 0 {
		return 0, nil
	}
	if err := st.load(ctx, nil, keys); err != nil {
		return 0, err
	}
	applied := 0
	for _, k := range keys {
		if err := st.wake(ctx, k); err != nil {
			return 0, err
		}
		for _, w := range st.waitingByTarget[k] {
			if w.status == "applied" {
				applied++
			}
		}
	}
	// 0 (targets that still cannot take their operations, none known
	// today): nothing to write, and the sweeper moves on.
	return applied, nil
}
