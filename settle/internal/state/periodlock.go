package state

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/cespare/xxhash/v2"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/settle/internal/db"
)

// PeriodLocks that meet on a record serialise on an advisory lock of its
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
// again holding them: ErrWidenLocks. Each retry holds strictly more, so the
// retries end.
type PeriodLocks map[PeriodKey]bool // true: exclusive

// PeriodKey names one slice of a (tenant, period).
type PeriodKey struct {
	tenant, period string
	slice          int32
}

// periodLockSlices is how many locks a (tenant, period) is cut into.
const periodLockSlices = 64

// RecordLock is the lock slice of the record record_id of a period.
func RecordLock(tenant, period, record string) PeriodKey {
	return PeriodKey{tenant, period, int32(xxhash.Sum64String(record) % periodLockSlices)}
}

// ErrWidenLocks ends a transaction attempt that needs period locks it does
// not hold; the next attempt takes them first.
var ErrWidenLocks = errors.New("needs more period locks")

// lockKey is the lock's pair of int4 keys: the slice (in a class of its
// own, 1<<16 up) and the (tenant, period)'s hash. Two periods that share a
// hash only serialise needlessly.
func (k PeriodKey) lockKey() [2]int32 {
	d := xxhash.New()
	_, _ = d.WriteString(k.tenant)
	_, _ = d.Write([]byte{0})
	_, _ = d.WriteString(k.period)
	return [2]int32{1<<16 + k.slice, int32(d.Sum64())}
}

// Add asks for k, exclusively or shared; an exclusive ask is never
// weakened.
func (l PeriodLocks) Add(k PeriodKey, exclusive bool) {
	l[k] = l[k] || exclusive
}

// covers reports whether l holds everything need asks for.
func (l PeriodLocks) covers(need PeriodLocks) bool {
	for k, x := range need {
		held, ok := l[k]
		if !ok || (x && !held) {
			return false
		}
	}
	return true
}

// Queue queues the lock statement for l: one lock per key, sorted, an
// exclusive one where any slice with that key asks for it.
func (l PeriodLocks) Queue(ctx context.Context, q *db.Queries) *db.PeriodLockBatchResults {
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

// WholePeriod asks for every slice of a period, exclusively.
func WholePeriod(tenant, period string) PeriodLocks {
	l := PeriodLocks{}
	for s := int32(0); s < periodLockSlices; s++ {
		l[PeriodKey{tenant, period, s}] = true
	}
	return l
}

// CheckLocks ends the attempt with ErrWidenLocks when its decisions need
// period locks it does not hold, after adding them to the carried set.
func (st *State) CheckLocks() error {
	if st.locks.covers(st.Need) {
		return nil
	}
	for k, x := range st.locks {
		st.carried.Add(k, x)
	}
	for k, x := range st.Need {
		st.carried.Add(k, x)
	}
	return ErrWidenLocks
}

// LockReads are the results of QueueLocks.
type LockReads struct {
	locks  *db.PeriodLockBatchResults
	closed *db.PeriodLookupBatchResults
}

// QueueLocks queues, first in a transaction's first round trip, its period
// locks and the look-up of which of those periods are closed (read by
// ReadLocks).
func (st *State) QueueLocks(ctx context.Context, q *db.Queries) LockReads {
	locks := st.locks.Queue(ctx, q)
	var t, p []string
	seen := map[[2]string]bool{}
	for k := range st.locks {
		if !seen[[2]string{k.tenant, k.period}] {
			seen[[2]string{k.tenant, k.period}] = true
			t, p = append(t, k.tenant), append(p, k.period)
		}
	}
	return LockReads{locks, q.PeriodLookup(ctx, []db.PeriodLookupParams{{TenantID: t, AccountPeriod: p}})}
}

// ReadLocks reads what QueueLocks queued.
func (st *State) ReadLocks(r LockReads) error {
	if err := pgq.Run(r.locks.Exec); err != nil {
		return fmt.Errorf("lock periods: %w", err)
	}
	closed, err := pgq.Rows(r.closed.Query)
	if err != nil {
		return fmt.Errorf("read closed periods: %w", err)
	}
	for _, c := range closed {
		st.Closed[[2]string{c.TenantID, c.AccountPeriod}] = true
	}
	return nil
}
