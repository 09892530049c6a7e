package settle

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/cespare/xxhash/v2"

	"github.com/settlehq/settle/settle/internal/db"
)

// Transactions that meet on a record serialise on an advisory lock of its
// (tenant, period) slice, so that what one writes is never missed by the
// other's reads:
//
//   - a dependent (a correction, refund, reclaim, capture or release) that
//     finds no target and would wait, and a target that looks for the
//     operations waiting for it, would each miss the other's uncommitted
//     row and commit, leaving the dependent waiting for ever. Every
//     transaction that claims an identity holds its record's slice shared;
//     one that leaves an operation waiting (or answers a redelivered one
//     that still waits) holds its target's slice exclusively. The lock
//     waits for the targets in flight, and a target that comes later waits
//     for the waiting row, so one of the two always sees the other;
//   - the waiting result goes to the results topic through the outbox in
//     that exclusive transaction, so its row comes before the final
//     result's, which only a later transaction can write;
//   - closing a period takes all its slices exclusively, so every
//     settlement committed after the close reads the period closed and is
//     flagged late.
//
// A period has periodLockSlices slices, a record's chosen by its record_id:
// a dependent that waits holds up only the writers of its slice (a single
// request through the HTTP edge, or a small batch), while a transaction
// takes at most periodLockSlices locks per period however large its batch.
//
// A transaction learns which locks it needs only as it decides, so it takes
// what its records name before its first read and, when it finds it needs
// more (a period of an operation it woke, a wait), rolls back and starts
// again holding them: errWidenLocks. Each retry holds strictly more, so the
// retries end.
type periodLocks map[periodKey]bool // true: exclusive

// periodKey names one slice of a (tenant, period).
type periodKey struct {
	tenant, period string
	slice          int32
}

// periodLockSlices is how many locks a (tenant, period) is cut into.
const periodLockSlices = 64

// recordLock is the lock slice of the record record_id of a period.
func recordLock(tenant, period, record string) periodKey {
	return periodKey{tenant, period, int32(xxhash.Sum64String(record) % periodLockSlices)}
}

// errWidenLocks ends a transaction attempt that needs period locks it does
// not hold; the next attempt takes them first.
var errWidenLocks = errors.New("needs more period locks")

// lockKey is the lock's pair of int4 keys: the slice (in a class of its
// own, 1<<16 up) and the (tenant, period)'s hash. Two periods that share a
// hash only serialise needlessly.
func (k periodKey) lockKey() [2]int32 {
	d := xxhash.New()
	_, _ = d.WriteString(k.tenant)
	_, _ = d.Write([]byte{0})
	_, _ = d.WriteString(k.period)
	return [2]int32{1<<16 + k.slice, int32(d.Sum64())}
}

// add asks for k, exclusively or shared; an exclusive ask is never
// weakened.
func (l periodLocks) add(k periodKey, exclusive bool) {
	l[k] = l[k] || exclusive
}

// covers reports whether l holds everything need asks for.
func (l periodLocks) covers(need periodLocks) bool {
	for k, x := range need {
		held, ok := l[k]
		if !ok || (x && !held) {
			return false
		}
	}
	return true
}

// queue queues the lock statement for l: one lock per key, sorted, an
// exclusive one where any slice with that key asks for it.
func (l periodLocks) queue(ctx context.Context, q *db.Queries) *db.PeriodLockBatchResults {
	modes := map[[2]int32]bool{}
	for k, x := range l {
		lk := k.lockKey()
		modes[lk] = modes[lk] || x
	}
	keys := make([][2]int32, 0, len(modes))
	for k := range modes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || (keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1])
	})
	k1, k2, excl := make([]int32, len(keys)), make([]int32, len(keys)), make([]bool, len(keys))
	for i, k := range keys {
		k1[i], k2[i], excl[i] = k[0], k[1], modes[k]
	}
	return q.PeriodLock(ctx, []db.PeriodLockParams{{A: k1, B: k2, X: excl}})
}

// wholePeriod asks for every slice of a period, exclusively.
func wholePeriod(tenant, period string) periodLocks {
	l := periodLocks{}
	for s := int32(0); s < periodLockSlices; s++ {
		l[periodKey{tenant, period, s}] = true
	}
	return l
}

// checkLocks ends the attempt with errWidenLocks when its decisions need
// period locks it does not hold, after adding them to the carried set.
func (st *txState) checkLocks() error {
	if st.locks.covers(st.need) {
		return nil
	}
	for k, x := range st.locks {
		st.carried.add(k, x)
	}
	for k, x := range st.need {
		st.carried.add(k, x)
	}
	return errWidenLocks
}

// lockReads are the results of queueLocks.
type lockReads struct {
	locks  *db.PeriodLockBatchResults
	closed *db.PeriodLookupBatchResults
}

// queueLocks queues, first in a transaction's first round trip, its period
// locks and the look-up of which of those periods are closed (read by
// readLocks).
func (st *txState) queueLocks(ctx context.Context, q *db.Queries) lockReads {
	locks := st.locks.queue(ctx, q)
	var t, p []string
	seen := map[[2]string]bool{}
	for k := range st.locks {
		if !seen[[2]string{k.tenant, k.period}] {
			seen[[2]string{k.tenant, k.period}] = true
			t, p = append(t, k.tenant), append(p, k.period)
		}
	}
	return lockReads{locks, q.PeriodLookup(ctx, []db.PeriodLookupParams{{TenantID: t, AccountPeriod: p}})}
}

// readLocks reads what queueLocks queued.
func (st *txState) readLocks(r lockReads) error {
	if err := db.Run(r.locks.Exec); err != nil {
		return fmt.Errorf("lock periods: %w", err)
	}
	closed, err := db.Rows(r.closed.Query)
	if err != nil {
		return fmt.Errorf("read closed periods: %w", err)
	}
	for _, c := range closed {
		st.closed[[2]string{c.TenantID, c.AccountPeriod}] = true
	}
	return nil
}
