package idempotency

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
)

// The Idempotency-Keys of a group of requests (the edge's group commit):
// what Claim, Complete and Release do for one key, done for many in one
// statement each, so that a group of concurrent requests costs three short
// transactions (claim, settle, complete) instead of three per request. The
// rules are those of one key: a claim is committed, and so visible to a
// concurrent retry as busy, before any work; the answer is stored by the
// fenced write only the owning attempt can make.

// GroupKeysMax bounds the keys of one group call: the arrays of one
// statement.
const GroupKeysMax = 1024

type tenantKey struct{ tenant, key string }

// ClaimMany claims the key of every request of a group, as Claim claims
// one: claims[i] answers reqs[i]. New keys are inserted by one statement
// and every key read by a second sent with it (one round trip), and a key
// whose lease expired is taken over by its own conditional update. A key
// that appears twice in reqs is claimed for its first request only; the
// later one sees that claim as another request would (busy, or a
// mismatch), as if the two had come one after the other.
func (s *Store) ClaimMany(ctx context.Context, reqs []Request) ([]Claim, error) {
	_, claims, err := s.CompleteAndClaim(ctx, nil, reqs)
	return claims, err
}

// CompleteMany stores the answers of a group's claimed keys by one fenced
// write: lost[i] is true when answers[i]'s attempt no longer owns its
// claim (taken over, or finished), and nothing was stored for it. The
// other answers are stored, in the same transaction.
func (s *Store) CompleteMany(ctx context.Context, answers []Answer) (lost []bool, err error) {
	lost, _, err = s.CompleteAndClaim(ctx, answers, nil)
	return lost, err
}

// CompleteAndClaim is CompleteMany of one group and ClaimMany of the next
// in one transaction (its statements in one round trip), the answers first: a
// request of the next group that repeats a key of the last one finds it
// done. Either list may be empty. When it fails, nothing of it was
// written.
func (s *Store) CompleteAndClaim(ctx context.Context, answers []Answer, reqs []Request) (lost []bool, claims []Claim, err error) {
	if len(reqs) > GroupKeysMax || len(answers) > GroupKeysMax {
		return nil, nil, fmt.Errorf("idempotency keys: %d claims and %d answers, at most %d each", len(reqs), len(answers), GroupKeysMax)
	}
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			return nil, nil, fmt.Errorf("claim idempotency keys: request %d: %w", i, err)
		}
	}
	if len(reqs) == 0 && len(answers) == 0 {
		return nil, nil, nil
	}
	what := fmt.Sprintf("complete %d and claim %d idempotency keys", len(answers), len(reqs))
	// One pipeline in one transaction, BEGIN and COMMIT included (db.Tx):
	// the answers first, then the insert of the new keys and the read of
	// every key (which sees what the insert did). The transaction keeps its
	// plans on index probes (db.ProbesOnly): idempotency_keys grows from
	// nothing faster than it is analysed.
	tx, err := db.Begin(ctx, s.pool)
	if err != nil {
		return nil, nil, dberr.Wrap(what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	p := db.NewPipeline(tx)
	defer p.Close() // for the early returns; the last step is Send
	q := db.New(p)
	done := completeParams(answers)
	var stored *db.IdempotencyCompleteManyBatchResults
	if len(answers) > 0 {
		stored = q.IdempotencyCompleteMany(ctx, []db.IdempotencyCompleteManyParams{done})
	}
	cl := newGroupClaim(reqs)
	var (
		made  *db.IdempotencyClaimManyBatchResults
		found *db.IdempotencyLookupManyBatchResults
	)
	if len(reqs) > 0 {
		made = q.IdempotencyClaimMany(ctx, []db.IdempotencyClaimManyParams{cl.insert})
		found = q.IdempotencyLookupMany(ctx, []db.IdempotencyLookupManyParams{cl.lookup})
	}
	// The COMMIT goes in the same round trip: a statement that fails rolls
	// the transaction back. What is checked below only after the round trip
	// (the rows read match the keys asked for) finds a defect, not a race:
	// its error leaves the group's claims made, as a crash after the commit
	// would, and the keys are taken over once their leases end.
	p.Commit(tx)
	if stored != nil {
		ids, err := db.Rows(stored.Query)
		if err != nil {
			return nil, nil, dberr.Wrap(what, err)
		}
		lost = lostOf(done.ID, ids)
	}
	if made != nil {
		inserted, err := db.Rows(made.Query)
		if err != nil {
			return nil, nil, dberr.Wrap(what, err)
		}
		rows, err := db.Rows(found.Query)
		if err != nil {
			return nil, nil, dberr.Wrap(what, err)
		}
		if err := cl.read(inserted, rows); err != nil {
			return nil, nil, dberr.Wrap(what, err)
		}
	}
	if err := p.Send(ctx); err != nil {
		return nil, nil, dberr.Wrap(what, err)
	}
	if err := tx.Commit(ctx); err != nil { // committed by the pipeline: gives the connection back
		return nil, nil, dberr.Wrap(what, err)
	}
	if len(reqs) > 0 {
		if err := cl.decide(ctx, s); err != nil {
			return nil, nil, err
		}
	}
	return lost, cl.claims, nil
}

// completeParams is the fenced write of answers.
func completeParams(answers []Answer) db.IdempotencyCompleteManyParams {
	n := len(answers)
	p := db.IdempotencyCompleteManyParams{ID: make([]int64, n), AttemptID: make([]string, n),
		Status: make([]int32, n), Response: make([][]byte, n)}
	for i, a := range answers {
		p.ID[i], p.AttemptID[i], p.Status[i], p.Response[i] = a.KeyID, a.AttemptID, int32(a.Status), a.Response
		if p.Response[i] == nil {
			p.Response[i] = []byte{}
		}
	}
	return p
}

// lostOf says, for each key of ids, whether the fenced write left it out
// of stored.
func lostOf(ids, stored []int64) []bool {
	got := make(map[int64]bool, len(stored))
	for _, id := range stored {
		got[id] = true
	}
	lost := make([]bool, len(ids))
	for i, id := range ids {
		lost[i] = !got[id]
	}
	return lost
}

// groupClaim is the claim of a group's keys in progress.
type groupClaim struct {
	reqs     []Request
	claims   []Claim
	firsts   []int // each key's first request, sorted by key
	insert   db.IdempotencyClaimManyParams
	lookup   db.IdempotencyLookupManyParams
	inserted map[int]bool
	found    []*db.IdempotencyLookupManyRow
}

func newGroupClaim(reqs []Request) *groupClaim {
	g := &groupClaim{reqs: reqs, claims: make([]Claim, len(reqs)), inserted: map[int]bool{}}
	if len(reqs) == 0 {
		return g
	}
	// Each key once, in its first request's place, sorted: two groups
	// that share keys wait on each other's index entries in one order.
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(reqs[a].TenantID, reqs[b].TenantID), cmp.Compare(reqs[a].Key, reqs[b].Key))
	})
	for n, i := range order {
		if n == 0 || reqs[order[n-1]].TenantID != reqs[i].TenantID || reqs[order[n-1]].Key != reqs[i].Key {
			g.firsts = append(g.firsts, i)
		}
	}
	// The insert of the keys reqs[firsts], then the read of every key of
	// reqs (the read sees what the insert did: one transaction).
	n := len(g.firsts)
	g.insert = db.IdempotencyClaimManyParams{TenantID: make([]string, n), Key: make([]string, n),
		RequestHash: make([][]byte, n), Lo: make([]int32, n), Hi: make([]int32, n), AttemptID: make([]string, n),
		LeaseMs: make([]int64, n)}
	for j, i := range g.firsts {
		r, p := reqs[i], &g.insert
		p.TenantID[j], p.Key[j], p.RequestHash[j] = r.TenantID, r.Key, r.RequestHash
		p.Lo[j] = int32(len(p.Canonicals) + 1) // PostgreSQL arrays start at 1
		p.Canonicals = append(p.Canonicals, r.Canonicals...)
		p.Hi[j] = int32(len(p.Canonicals))
		p.AttemptID[j], p.LeaseMs[j] = newAttemptID(), r.Lease.Milliseconds()
	}
	g.lookup = db.IdempotencyLookupManyParams{TenantID: make([]string, len(reqs)), Key: make([]string, len(reqs))}
	for i, r := range reqs {
		g.lookup.TenantID[i], g.lookup.Key[i] = r.TenantID, r.Key
	}
	return g
}

// read takes in what the insert made and what the read found.
func (g *groupClaim) read(made []db.IdempotencyClaimManyRow, found []db.IdempotencyLookupManyRow) error {
	byKey := make(map[tenantKey]int, len(g.firsts))
	for j, i := range g.firsts {
		byKey[tenantKey{g.reqs[i].TenantID, g.reqs[i].Key}] = j
	}
	for _, m := range made {
		j, ok := byKey[tenantKey{m.TenantID, m.Key}]
		if !ok {
			return fmt.Errorf("inserted key tenant=%s key=%q was not asked for", m.TenantID, m.Key)
		}
		i := g.firsts[j]
		g.inserted[i] = true
		g.claims[i] = Claim{State: ClaimAcquired, KeyID: m.ID, AttemptID: g.insert.AttemptID[j], Attempts: 1}
	}
	g.found = make([]*db.IdempotencyLookupManyRow, len(g.reqs))
	for k := range found {
		f := &found[k]
		if f.Ord < 1 || int(f.Ord) > len(g.reqs) {
			return fmt.Errorf("key ordinal %d out of range", f.Ord)
		}
		g.found[f.Ord-1] = f
	}
	return nil
}

// decide decides every request whose key the insert did not make.
func (g *groupClaim) decide(ctx context.Context, s *Store) error {
	for i := range g.reqs {
		if g.inserted[i] {
			continue
		}
		c, err := s.decideClaim(ctx, g.reqs[i], g.found[i])
		if err != nil {
			return err
		}
		g.claims[i] = c
	}
	return nil
}

// decideClaim decides a request whose key existed (row fd) as Claim does;
// an expired claim is taken over, and a key whose state moved meanwhile
// (or that was not found: only a race with a claimer gets there, keys are
// never deleted) is claimed again alone.
func (s *Store) decideClaim(ctx context.Context, req Request, fd *db.IdempotencyLookupManyRow) (Claim, error) {
	if fd == nil {
		return s.Claim(ctx, req)
	}
	c := Claim{KeyID: fd.ID, Attempts: int(fd.Attempts), ResponseStatus: int(fd.ResponseStatus),
		Response: fd.Response, StoredCanonicals: fd.Canonicals}
	switch {
	case !bytes.Equal(fd.RequestHash, req.RequestHash) && !sameCanonicals(c.StoredCanonicals, req.Canonicals):
		c.State, c.Response, c.ResponseStatus = ClaimMismatch, nil, 0
	case fd.Status == "done":
		c.State, c.StoredCanonicals = ClaimReplay, nil
	case fd.LeaseLeftMs > 0:
		c.State, c.StoredCanonicals, c.RetryAfter = ClaimBusy, nil, time.Duration(fd.LeaseLeftMs)*time.Millisecond
	default:
		return s.takeOver(ctx, req, c.KeyID, fd.Holder)
	}
	return c, nil
}

// takeOver takes over the expired claim of req's key (row keyID, held by
// holder); if another attempt moved first, the key is claimed again alone.
func (s *Store) takeOver(ctx context.Context, req Request, keyID int64, holder string) (Claim, error) {
	attempt := newAttemptID()
	attempts, err := db.On(s.pool).IdempotencyTakeover(ctx, db.IdempotencyTakeoverParams{ID: keyID, Holder: holder,
		AttemptID: attempt, LeaseMs: req.Lease.Milliseconds()})
	if errors.Is(err, pgx.ErrNoRows) {
		return s.Claim(ctx, req)
	}
	if err != nil {
		return Claim{}, dberr.Wrap(fmt.Sprintf("take over idempotency key %d", keyID), err)
	}
	return Claim{State: ClaimAcquired, KeyID: keyID, AttemptID: attempt, Attempts: int(attempts), TakenOver: true}, nil
}

// Answer is the answer of one claimed key, for CompleteMany.
type Answer struct {
	KeyID     int64
	AttemptID string
	Status    int
	Response  []byte
}

// ReleaseMany ends the leases of claims whose work failed, as Release does
// for one; a claim its attempt no longer owns is left alone. It returns
// how many it released.
func (s *Store) ReleaseMany(ctx context.Context, keyIDs []int64, attemptIDs []string) (int, error) {
	if len(keyIDs) != len(attemptIDs) || len(keyIDs) > GroupKeysMax {
		return 0, fmt.Errorf("release idempotency keys: %d ids and %d attempts (at most %d)", len(keyIDs), len(attemptIDs), GroupKeysMax)
	}
	released, err := db.On(s.pool).IdempotencyReleaseMany(ctx, db.IdempotencyReleaseManyParams{ID: keyIDs, AttemptID: attemptIDs})
	if err != nil {
		return 0, dberr.Wrap(fmt.Sprintf("release %d idempotency keys", len(keyIDs)), err)
	}
	return len(released), nil
}
