package idempotency

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/settlehq/settle/edge/idempotency/internal/db"
	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
)

// The Idempotency-Keys of a group of requests (the edge's group commit):
// claimed, settled and answered in one settling transaction, which the
// group rides (settle.Rider, settle.Store.SettleWith). In its first round
// trip the transaction takes each key's advisory lock without waiting and
// then reads the keys; only the records of the keys it claimed are then
// loaded and settled; in the commit's round trip it inserts every key it
// settled, done, with its answer. So a key is either absent or done with the
// answer of the records it settled, never in between: a crash before the
// commit leaves neither, a crash after it both. A concurrent request with
// a key whose lock another transaction holds is answered busy at once,
// without waiting for it.

// GroupKeysMax bounds the keys of one group: the arrays of one statement.
const GroupKeysMax = 1024

// busyRetry is the Retry-After of a key another transaction holds: it
// ends with that transaction, within its settle timeout.
const busyRetry = time.Second

type tenantKey struct{ tenant, key string }

// AnswerFunc builds the answer of request req of a group from the results
// of its records, in order, inside the transaction that stores it.
type AnswerFunc func(req int, results []message.Result) (Answer, error)

// Answer is what a request is answered, stored with its key.
type Answer struct {
	Status int
	Body   []byte
	// Quotes are the stretches of Body that are identities' stored
	// responses (message.Result.ResponseOf), in order: the key's row names
	// those identities instead of holding copies (migration 0020).
	Quotes []Quote
}

// Quote says that Body[At:At+Len] of an Answer is the stored response of
// identity IdentityID, byte for byte.
type Quote struct {
	At, Len    int
	IdentityID int64
}

// stored is a's body with its quotes cut out, and where each goes in it.
func (a Answer) stored() (rest []byte, at []int32, err error) {
	if len(a.Quotes) == 0 {
		return a.Body, nil, nil
	}
	rest = make([]byte, 0, len(a.Body))
	prev := 0
	for _, q := range a.Quotes {
		if q.IdentityID <= 0 || q.At < prev || q.Len <= 0 || q.At+q.Len > len(a.Body) {
			return nil, nil, fmt.Errorf("a quote of identity %d at bytes %d+%d of an answer of %d bytes", q.IdentityID, q.At, q.Len, len(a.Body))
		}
		rest = append(rest, a.Body[prev:q.At]...)
		at = append(at, int32(len(rest))) //nolint:gosec // an answer is far below 2 GiB
		prev = q.At + q.Len
	}
	return append(rest, a.Body[prev:]...), at, nil
}

// Group is the keys of a group of requests, for one SettleWith call over
// its inputs. Create it with NewGroup; after the call, Claims says what
// became of each request.
type Group struct {
	reqs   []Request
	inputs []message.Input
	first  []int // request i's records are inputs[first[i]:first[i+1]]
	answer AnswerFunc

	lock   db.IdempotencyLockManyParams
	lookup db.IdempotencyLookupManyParams

	// the attempt's
	locks    *db.IdempotencyLockManyBatchResults
	found    *db.IdempotencyLookupManyBatchResults
	takeover *db.IdempotencyTakeoverManyBatchResults
	attempt  map[int64]string // keys taken over: this attempt's id
	claims   []Claim
	settles  []bool
}

var _ settle.Rider = (*Group)(nil)

// NewGroup returns the keys of reqs, whose records are inputs in order
// (len(reqs[i].Canonicals) each). The inputs of each request whose key is
// claimed get its coordinates once the transaction has read the keys.
func NewGroup(reqs []Request, inputs []message.Input, answer AnswerFunc) (*Group, error) {
	if len(reqs) == 0 || len(reqs) > GroupKeysMax {
		return nil, fmt.Errorf("idempotency keys: a group of %d requests, 1 to %d", len(reqs), GroupKeysMax)
	}
	g := &Group{reqs: reqs, inputs: inputs, first: make([]int, len(reqs)+1), answer: answer}
	n := len(reqs)
	g.lock = db.IdempotencyLockManyParams{Class: make([]int32, n), Hash: make([]int32, n)}
	g.lookup = db.IdempotencyLookupManyParams{TenantID: make([]string, n), Key: make([]string, n)}
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("idempotency keys: request %d: %w", i, err)
		}
		g.first[i+1] = g.first[i] + len(r.Canonicals)
		g.lock.Class[i], g.lock.Hash[i] = lockOf(r.TenantID, r.Key)
		g.lookup.TenantID[i], g.lookup.Key[i] = r.TenantID, r.Key
	}
	if g.first[n] != len(inputs) {
		return nil, fmt.Errorf("idempotency keys: %d requests of %d records, %d inputs", n, g.first[n], len(inputs))
	}
	return g, nil
}

// lockOf is the advisory lock of a key: its hash, in a class below zero,
// where no other lock of the schema is.
func lockOf(tenant, key string) (class, hash int32) {
	h := xxhash.Sum64String(tenant + "\x00" + key)
	return int32(uint32(h>>32) | 1<<31), int32(uint32(h)) //nolint:gosec // the bits, as PostgreSQL's int4
}

// Claims is what became of each request in the transaction's last
// attempt: acquired (its records settled and its answer, in Response,
// stored with them), a replay, busy, a mismatch, or a key to take over.
func (g *Group) Claims() []Claim { return g.claims }

// QueueFirst queues the locks of the keys, the read of the keys after
// them and the take-over of keys being taken over.
func (g *Group) QueueFirst(ctx context.Context, p *pgq.Pipeline) {
	q := db.New(p)
	g.claims, g.settles = make([]Claim, len(g.reqs)), make([]bool, len(g.inputs))
	g.locks = q.IdempotencyLockMany(ctx, []db.IdempotencyLockManyParams{g.lock})
	g.found = q.IdempotencyLookupMany(ctx, []db.IdempotencyLookupManyParams{g.lookup})
	g.takeover, g.attempt = nil, nil
	var t db.IdempotencyTakeoverManyParams
	for _, r := range g.reqs {
		if r.TakeOver != nil {
			if g.attempt == nil {
				g.attempt = map[int64]string{}
			}
			a := newAttemptID()
			g.attempt[r.TakeOver.KeyID] = a
			t.ID, t.Holder, t.AttemptID = append(t.ID, r.TakeOver.KeyID), append(t.Holder, r.TakeOver.Holder), append(t.AttemptID, a)
		}
	}
	if len(t.ID) > 0 {
		g.takeover = q.IdempotencyTakeoverMany(ctx, []db.IdempotencyTakeoverManyParams{t})
	}
}

// ReadFirst reads the locks and the keys and decides each request.
func (g *Group) ReadFirst() error {
	locks, err := pgq.Rows(g.locks.Query)
	if err != nil {
		return fmt.Errorf("lock idempotency keys: %w", err)
	}
	found, err := pgq.Rows(g.found.Query)
	if err != nil {
		return fmt.Errorf("read idempotency keys: %w", err)
	}
	taken := map[int64]bool{}
	if g.takeover != nil {
		ids, err := pgq.Rows(g.takeover.Query)
		if err != nil {
			return fmt.Errorf("take over idempotency keys: %w", err)
		}
		for _, id := range ids {
			taken[id] = true
		}
	}
	if len(locks) != len(g.reqs) || len(found) != len(g.reqs) {
		return fmt.Errorf("idempotency keys: %d requests, %d locks and %d keys read", len(g.reqs), len(locks), len(found))
	}
	firstOf := make(map[tenantKey]int, len(g.reqs))
	for i, r := range g.reqs {
		k := tenantKey{r.TenantID, r.Key}
		if j, ok := firstOf[k]; ok && g.claims[j].State == ClaimAcquired {
			// The key's first request in the group is settling it: this
			// one sees that claim, as if it came right after.
			if sameRequest(g.reqs[j].RequestHash, g.reqs[j].Canonicals, r) {
				g.claims[i] = Claim{State: ClaimBusy, KeyID: g.claims[j].KeyID, RetryAfter: busyRetry}
			} else {
				g.claims[i] = Claim{State: ClaimMismatch, KeyID: g.claims[j].KeyID, StoredCanonicals: g.reqs[j].Canonicals}
			}
			continue
		} else if !ok {
			firstOf[k] = i
		}
		c := g.decide(r, &found[i], locks[i].Locked, taken)
		g.claims[i] = c
		if c.State == ClaimAcquired {
			// The key's coordinates; a new key's were never used, a key
			// taken over is probed at them (its records may have settled).
			for j := g.first[i]; j < g.first[i+1]; j++ {
				g.settles[j] = true
				g.inputs[j].Offset, g.inputs[j].FirstDelivery = HTTPOffset(c.KeyID, j-g.first[i]), !c.TakenOver
			}
		}
	}
	return nil
}

// decide decides request r from its key's row f (or the id reserved for
// it when there is none) and its lock.
func (g *Group) decide(r Request, f *db.IdempotencyLookupManyRow, locked bool, taken map[int64]bool) Claim {
	if !f.Found {
		if !locked || r.TakeOver != nil { // keys are never deleted: only a defect takes the second
			return Claim{State: ClaimBusy, RetryAfter: busyRetry}
		}
		return Claim{State: ClaimAcquired, KeyID: f.ID, Attempts: 1}
	}
	c := Claim{KeyID: f.ID, Attempts: int(f.Attempts)}
	switch {
	case !sameRequest(f.RequestHash, f.Canonicals, r):
		c.State, c.StoredCanonicals = ClaimMismatch, f.Canonicals
	case f.Status == "done":
		c.State, c.ResponseStatus, c.Response = ClaimReplay, int(f.ResponseStatus), f.Response
	case r.TakeOver != nil && r.TakeOver.KeyID == f.ID && locked && taken[f.ID]:
		c.State, c.Attempts, c.TakenOver = ClaimAcquired, c.Attempts+1, true
	case f.LeaseLeftMs > 0:
		c.State, c.RetryAfter = ClaimBusy, time.Duration(f.LeaseLeftMs)*time.Millisecond
	case !locked || r.TakeOver != nil: // another transaction took it over first
		c.State, c.RetryAfter = ClaimBusy, busyRetry
	default:
		c.State, c.Holder = ClaimTakeOver, f.Holder
	}
	return c
}

// sameRequest says whether r is the request stored as hash and
// canonicals: the same bytes, or the same records.
func sameRequest(hash []byte, canonicals [][]byte, r Request) bool {
	return bytes.Equal(hash, r.RequestHash) || sameCanonicals(canonicals, r.Canonicals)
}

// Settles says whether input i settles in this attempt: its request's key
// was acquired.
func (g *Group) Settles(i int) bool { return g.settles[i] }

// QueueWrite builds the answer of every acquired request from its
// records' results and queues the keys' writes: the new ones inserted
// done, the ones taken over updated to done; each answer is stored with
// its quotes cut out (Answer.Quotes).
func (g *Group) QueueWrite(ctx context.Context, p *pgq.Pipeline, results []message.Result) error {
	q := db.New(p)
	var (
		ins  db.IdempotencyInsertDoneParams
		done db.IdempotencyCompleteManyParams
	)
	for i, r := range g.reqs {
		c := &g.claims[i]
		if c.State != ClaimAcquired {
			continue
		}
		a, err := g.answer(i, results[g.first[i]:g.first[i+1]])
		if err != nil {
			return err
		}
		if a.Body == nil {
			a.Body = []byte{}
		}
		if a.Status < 100 || a.Status > 599 {
			return fmt.Errorf("idempotency key %d: answer status %d is not an HTTP status", c.KeyID, a.Status)
		}
		rest, at, err := a.stored()
		if err != nil {
			return fmt.Errorf("idempotency key %d: %w", c.KeyID, err)
		}
		c.ResponseStatus, c.Response = a.Status, a.Body
		if c.TakenOver {
			done.ID, done.AttemptID = append(done.ID, c.KeyID), append(done.AttemptID, g.attempt[c.KeyID])
			done.Status, done.Answer = append(done.Status, int32(a.Status)), append(done.Answer, rest)
			done.Qlo = append(done.Qlo, int32(len(done.QuoteAt)+1)) // PostgreSQL arrays start at 1
			done.QuoteAt, done.QuoteIdentity = append(done.QuoteAt, at...), appendQuoted(done.QuoteIdentity, a.Quotes)
			done.Qhi = append(done.Qhi, int32(len(done.QuoteAt)))
			continue
		}
		ins.ID, ins.TenantID, ins.Key = append(ins.ID, c.KeyID), append(ins.TenantID, r.TenantID), append(ins.Key, r.Key)
		ins.RequestHash = append(ins.RequestHash, r.RequestHash)
		ins.Lo = append(ins.Lo, int32(len(ins.Canonicals)+1))
		ins.Canonicals = append(ins.Canonicals, r.Canonicals...)
		ins.Hi = append(ins.Hi, int32(len(ins.Canonicals)))
		ins.Status, ins.Answer = append(ins.Status, int32(a.Status)), append(ins.Answer, rest)
		ins.Qlo = append(ins.Qlo, int32(len(ins.QuoteAt)+1))
		ins.QuoteAt, ins.QuoteIdentity = append(ins.QuoteAt, at...), appendQuoted(ins.QuoteIdentity, a.Quotes)
		ins.Qhi = append(ins.Qhi, int32(len(ins.QuoteAt)))
	}
	if len(ins.ID) > 0 {
		_ = q.IdempotencyInsertDone(ctx, ins) // queued: the commit reports its error
	}
	if len(done.ID) > 0 {
		_ = q.IdempotencyCompleteMany(ctx, done)
	}
	return nil
}

// appendQuoted appends the identities quotes name.
func appendQuoted(ids []int64, quotes []Quote) []int64 {
	for _, q := range quotes {
		ids = append(ids, q.IdentityID)
	}
	return ids
}
