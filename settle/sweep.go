package settle

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/fingerprint"
)

var (
	sqlWaitingDue = mustQuery("waiting_due.sql")
	sqlHoldDue    = mustQuery("hold_due.sql")
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
	var n int
	err := s.withRetries(ctx, sweepPageMax, func(int) error {
		var err error
		n, err = s.sweepOrphansOnce(ctx, orphanAfter)
		return err
	})
	return n, err
}

func (s *Store) sweepOrphansOnce(ctx context.Context, orphanAfter time.Duration) (int, error) {
	tx, err := s.pool.BeginTx(ctx, settleTxOptions)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, _ := tx.Query(ctx, sqlWaitingDue, fmt.Sprintf("%d milliseconds", orphanAfter.Milliseconds()), sweepPageMax)
	var ds []decoded
	for rows.Next() {
		var id fingerprint.Identity
		var op string
		if err := rows.Scan(&id.TenantID, &id.AccountPeriod, &id.RecordID, &op); err != nil {
			return 0, err
		}
		id.Operation = fingerprint.Kind(op)
		// Stand-ins: load() finds the waiting operations by identity.
		ds = append(ds, decoded{in: &Input{Topic: "settle.sweep"}, id: id, rec: fingerprint.Record{TenantID: id.TenantID,
			AccountPeriod: id.AccountPeriod, RecordID: id.RecordID, Kind: id.Operation}})
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(ds) == 0 {
		return 0, nil
	}
	st := s.newTxState(tx, 1, s.now())
	if err := st.load(ctx, ds); err != nil {
		return 0, err
	}
	for _, d := range ds {
		w := st.waitingByID[d.id]
		if w == nil || w.status != "waiting" {
			continue
		}
		final := Result{Version: SchemaVersionOutput, Source: Coordinates{w.d.in.Topic, w.d.in.Partition, w.d.in.Offset}}
		idj := identityJSON(w.d.id)
		final.Identity = &idj
		if w.d.rec.Kind == fingerprint.KindUsage && w.d.rec.HoldID != "" {
			// A capture whose hold never came is charged as plain usage.
			w.d.rec.HoldID, w.d.rec.HoldPeriod = "", ""
			p, err := st.process(ctx, w.d)
			if err != nil {
				return 0, err
			}
			w.status, w.dirty = "applied", true
			final.Outcome, final.Reason, final.Response = p.Outcome, p.Reason, p.Response
		} else {
			caseID, err := st.openCase(ctx, w.d, ReasonOrphan, 0, nil, w.canonical,
				fmt.Sprintf("its target %s of period %s has not settled after %s", w.target.record, w.target.period, orphanAfter))
			if err != nil {
				return 0, err
			}
			w.status, w.caseID, w.dirty = "orphaned", caseID, true
			final.Outcome, final.Reason, final.CaseID = OutcomeQuarantined, ReasonOrphan, caseID
		}
		body := final.AppendJSON(nil)
		st.outbox = append(st.outbox, outboxRow{topic: s.cfg.ResultsTopic, key: w.d.in.Key, value: body,
			headers: encodeHeaders([]fingerprint.Header{{Key: "version", Value: []byte(strconv.Itoa(SchemaVersionOutput))}})})
	}
	if err := st.write(ctx, ""); err != nil {
		return 0, err
	}
	return len(ds), s.commit(ctx, tx, st)
}

// ExpireHolds releases active holds whose expires_at has passed, each as its
// own settlement (identity: the hold's, operation expire), published like
// any other. Transactions that look at an account's funds release its
// expired holds too; this catches the ones nobody looks at. It returns how
// many it released; call it until it returns 0.
func (s *Store) ExpireHolds(ctx context.Context) (int, error) {
	var n int
	err := s.withRetries(ctx, sweepPageMax, func(int) error {
		var err error
		n, err = s.expireHoldsOnce(ctx)
		return err
	})
	return n, err
}

func (s *Store) expireHoldsOnce(ctx context.Context) (int, error) {
	tx, err := s.pool.BeginTx(ctx, settleTxOptions)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, _ := tx.Query(ctx, sqlHoldDue, sweepPageMax)
	var holdIDs, accIDs []int64
	for rows.Next() {
		var h, a int64
		if err := rows.Scan(&h, &a); err != nil {
			return 0, err
		}
		holdIDs, accIDs = append(holdIDs, h), append(accIDs, a)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(holdIDs) == 0 {
		return 0, nil
	}
	st := s.newTxState(tx, 1, s.now())
	// Accounts first, then holds: the order every settling transaction
	// locks in.
	b := &pgx.Batch{}
	b.Queue(sqlAccountLockByID, accIDs)
	b.Queue(sqlHoldLock, holdIDs, []int64{})
	b.Queue("SELECT now()")
	br := tx.SendBatch(ctx, b)
	if err := st.readAccounts(br, -1); err != nil {
		br.Close()
		return 0, err
	}
	if err := st.readHolds(br); err != nil {
		br.Close()
		return 0, err
	}
	if err := br.QueryRow().Scan(&st.now); err != nil {
		br.Close()
		return 0, err
	}
	if err := br.Close(); err != nil {
		return 0, err
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
	if err := st.write(ctx, ""); err != nil {
		return 0, err
	}
	return n, s.commit(ctx, tx, st)
}
