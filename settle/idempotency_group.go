package settle

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// The Idempotency-Keys of a group of requests (the edge's group commit):
// what ClaimIdempotencyKey, CompleteIdempotencyKey and
// ReleaseIdempotencyKey do for one key, done for many in one statement
// each, so that a group of concurrent requests costs three short
// transactions (claim, settle, complete) instead of three per request. The
// rules are those of one key: a claim is committed, and so visible to a
// concurrent retry as busy, before any work; the answer is stored by the
// fenced write only the owning attempt can make.

var (
	sqlIdempotencyClaimMany    = mustQuery("idempotency_claim_many.sql")
	sqlIdempotencyLookupMany   = mustQuery("idempotency_lookup_many.sql")
	sqlIdempotencyCompleteMany = mustQuery("idempotency_complete_many.sql")
	sqlIdempotencyReleaseMany  = mustQuery("idempotency_release_many.sql")
)

// IdempotencyGroupKeysMax bounds the keys of one group call: the arrays of
// one statement.
const IdempotencyGroupKeysMax = 1024

type tenantKey struct{ tenant, key string }

// ClaimIdempotencyKeys claims the key of every request of a group, as
// ClaimIdempotencyKey claims one: claims[i] answers reqs[i]. New keys are
// inserted by one statement and every key read by a second sent with it
// (one round trip), and a key whose lease expired is taken over by its own
// conditional update. A key that appears twice in reqs is claimed for its
// first request only; the later one sees that claim as another request
// would (busy, or a mismatch), as if the two had come one after the other.
func (s *Store) ClaimIdempotencyKeys(ctx context.Context, reqs []IdempotencyRequest) ([]IdempotencyClaim, error) {
	_, claims, err := s.CompleteAndClaimIdempotencyKeys(ctx, nil, reqs)
	return claims, err
}

// CompleteIdempotencyKeys stores the answers of a group's claimed keys by
// one fenced write: lost[i] is true when answers[i]'s attempt no longer
// owns its claim (taken over, or finished), and nothing was stored for it.
// The other answers are stored, in the same transaction.
func (s *Store) CompleteIdempotencyKeys(ctx context.Context, answers []IdempotencyAnswer) (lost []bool, err error) {
	lost, _, err = s.CompleteAndClaimIdempotencyKeys(ctx, answers, nil)
	return lost, err
}

// CompleteAndClaimIdempotencyKeys is CompleteIdempotencyKeys of one group
// and ClaimIdempotencyKeys of the next in one round trip and one implicit
// transaction, the answers first: a request of the next group that repeats
// a key of the last one finds it done. Either list may be empty. When it
// fails, nothing of it was written.
func (s *Store) CompleteAndClaimIdempotencyKeys(ctx context.Context, answers []IdempotencyAnswer, reqs []IdempotencyRequest) (lost []bool, claims []IdempotencyClaim, err error) {
	if len(reqs) > IdempotencyGroupKeysMax || len(answers) > IdempotencyGroupKeysMax {
		return nil, nil, fmt.Errorf("idempotency keys: %d claims and %d answers, at most %d each", len(reqs), len(answers), IdempotencyGroupKeysMax)
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
	b := &pgx.Batch{}
	ids := queueComplete(b, answers)
	cl := newGroupClaim(reqs)
	cl.queue(b)
	br := s.pool.SendBatch(ctx, b)
	defer func() { _ = br.Close() }() // closed below on success; this one ends a failed batch
	if len(answers) > 0 {
		stored, err := readIDs(br)
		if err != nil {
			return nil, nil, wrapStoreErr(what, err)
		}
		lost = make([]bool, len(ids))
		for i, id := range ids {
			lost[i] = !stored[id]
		}
	}
	if len(reqs) > 0 {
		if err := cl.read(br); err != nil {
			return nil, nil, wrapStoreErr(what, err)
		}
	}
	if err := br.Close(); err != nil {
		return nil, nil, wrapStoreErr(what, err)
	}
	if len(reqs) > 0 {
		if err := cl.decide(ctx, s); err != nil {
			return nil, nil, err
		}
	}
	return lost, cl.claims, nil
}

// queueComplete queues the fenced write of answers and returns their key
// ids, in order.
func queueComplete(b *pgx.Batch, answers []IdempotencyAnswer) []int64 {
	if len(answers) == 0 {
		return nil
	}
	n := len(answers)
	ids, attempts, statuses, bodies := make([]int64, n), make([]string, n), make([]int32, n), make([][]byte, n)
	for i, a := range answers {
		ids[i], attempts[i], statuses[i], bodies[i] = a.KeyID, a.AttemptID, int32(a.Status), a.Response
		if bodies[i] == nil {
			bodies[i] = []byte{}
		}
	}
	b.Queue(sqlIdempotencyCompleteMany, ids, attempts, statuses, bodies)
	return ids
}

// groupClaim is the claim of a group's keys in progress.
type groupClaim struct {
	reqs     []IdempotencyRequest
	claims   []IdempotencyClaim
	firsts   []int // each key's first request, sorted by key
	attempts []string
	inserted map[int]bool
	found    []*keyRow
}

func newGroupClaim(reqs []IdempotencyRequest) *groupClaim {
	g := &groupClaim{reqs: reqs, claims: make([]IdempotencyClaim, len(reqs)), inserted: map[int]bool{}}
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
	return g
}

// queue queues the insert of the keys reqs[firsts] and the read of every
// key of reqs (the read sees what the insert did: one transaction).
func (g *groupClaim) queue(b *pgx.Batch) {
	if len(g.reqs) == 0 {
		return
	}
	n := len(g.firsts)
	tenants, keys, hashes := make([]string, n), make([]string, n), make([][]byte, n)
	los, his, leases := make([]int32, n), make([]int32, n), make([]int64, n)
	g.attempts = make([]string, n)
	var flat [][]byte
	for j, i := range g.firsts {
		r := g.reqs[i]
		tenants[j], keys[j], hashes[j] = r.TenantID, r.Key, r.RequestHash
		los[j] = int32(len(flat) + 1) // PostgreSQL arrays start at 1
		flat = append(flat, r.Canonicals...)
		his[j] = int32(len(flat))
		g.attempts[j], leases[j] = newAttemptID(), r.Lease.Milliseconds()
	}
	b.Queue(sqlIdempotencyClaimMany, tenants, keys, hashes, flat, los, his, g.attempts, leases)
	allTenants, allKeys := make([]string, len(g.reqs)), make([]string, len(g.reqs))
	for i, r := range g.reqs {
		allTenants[i], allKeys[i] = r.TenantID, r.Key
	}
	b.Queue(sqlIdempotencyLookupMany, allTenants, allKeys)
}

// read reads what the insert made and what the read found.
func (g *groupClaim) read(br pgx.BatchResults) error {
	byKey := make(map[tenantKey]int, len(g.firsts))
	for j, i := range g.firsts {
		byKey[tenantKey{g.reqs[i].TenantID, g.reqs[i].Key}] = j
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	var (
		id          int64
		tenant, key string
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &tenant, &key}, func() error {
		j, ok := byKey[tenantKey{tenant, key}]
		if !ok {
			return fmt.Errorf("inserted key tenant=%s key=%q was not asked for", tenant, key)
		}
		i := g.firsts[j]
		g.inserted[i] = true
		g.claims[i] = IdempotencyClaim{State: ClaimAcquired, KeyID: id, AttemptID: g.attempts[j], Attempts: 1}
		return nil
	})
	if err != nil {
		return err
	}
	g.found, err = readKeyRows(br, len(g.reqs))
	return err
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

// keyRow is an existing Idempotency-Key as idempotency_lookup_many.sql
// reads it.
type keyRow struct {
	c         IdempotencyClaim
	hash      []byte
	status    string
	holder    string
	leaseLeft int64
}

// readKeyRows reads the rows of idempotency_lookup_many.sql by ordinal.
func readKeyRows(br pgx.BatchResults, n int) ([]*keyRow, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	found := make([]*keyRow, n)
	var (
		ord int64
		f   keyRow
	)
	_, err = pgx.ForEachRow(rows, []any{&ord, &f.c.KeyID, &f.hash, &f.c.StoredCanonicals, &f.status, &f.holder,
		&f.c.Attempts, &f.leaseLeft, &f.c.ResponseStatus, &f.c.Response}, func() error {
		if ord < 1 || int(ord) > n {
			return fmt.Errorf("key ordinal %d out of range", ord)
		}
		cp := f
		found[ord-1] = &cp
		return nil
	})
	return found, err
}

// decideClaim decides a request whose key existed (row fd) as
// ClaimIdempotencyKey does; an expired claim is taken over, and a key
// whose state moved meanwhile (or that was not found: only a race with a
// claimer gets there, keys are never deleted) is claimed again alone.
func (s *Store) decideClaim(ctx context.Context, req IdempotencyRequest, fd *keyRow) (IdempotencyClaim, error) {
	if fd == nil {
		return s.ClaimIdempotencyKey(ctx, req)
	}
	c := fd.c
	switch {
	case !bytes.Equal(fd.hash, req.RequestHash) && !sameCanonicals(c.StoredCanonicals, req.Canonicals):
		c.State, c.Response, c.ResponseStatus = ClaimMismatch, nil, 0
	case fd.status == "done":
		c.State, c.StoredCanonicals = ClaimReplay, nil
	case fd.leaseLeft > 0:
		c.State, c.StoredCanonicals, c.RetryAfter = ClaimBusy, nil, time.Duration(fd.leaseLeft)*time.Millisecond
	default:
		return s.takeOver(ctx, req, c.KeyID, fd.holder)
	}
	return c, nil
}

// takeOver takes over the expired claim of req's key (row keyID, held by
// holder); if another attempt moved first, the key is claimed again alone.
func (s *Store) takeOver(ctx context.Context, req IdempotencyRequest, keyID int64, holder string) (IdempotencyClaim, error) {
	attempt := newAttemptID()
	var attempts int
	err := s.pool.QueryRow(ctx, sqlIdempotencyTakeover, keyID, holder, attempt, req.Lease.Milliseconds()).Scan(&attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.ClaimIdempotencyKey(ctx, req)
	}
	if err != nil {
		return IdempotencyClaim{}, wrapStoreErr(fmt.Sprintf("take over idempotency key %d", keyID), err)
	}
	return IdempotencyClaim{State: ClaimAcquired, KeyID: keyID, AttemptID: attempt, Attempts: attempts, TakenOver: true}, nil
}

// IdempotencyAnswer is the answer of one claimed key, for
// CompleteIdempotencyKeys.
type IdempotencyAnswer struct {
	KeyID     int64
	AttemptID string
	Status    int
	Response  []byte
}

// ReleaseIdempotencyKeys ends the leases of claims whose work failed, as
// ReleaseIdempotencyKey does for one; a claim its attempt no longer owns is
// left alone. It returns how many it released.
func (s *Store) ReleaseIdempotencyKeys(ctx context.Context, keyIDs []int64, attemptIDs []string) (int, error) {
	if len(keyIDs) != len(attemptIDs) || len(keyIDs) > IdempotencyGroupKeysMax {
		return 0, fmt.Errorf("release idempotency keys: %d ids and %d attempts (at most %d)", len(keyIDs), len(attemptIDs), IdempotencyGroupKeysMax)
	}
	released, err := s.fencedMany(ctx, fmt.Sprintf("release %d idempotency keys", len(keyIDs)), sqlIdempotencyReleaseMany, keyIDs, attemptIDs)
	return len(released), err
}

// fencedMany runs one fenced statement over many keys and returns the ids
// it changed.
func (s *Store) fencedMany(ctx context.Context, what, sql string, args ...any) (map[int64]bool, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, wrapStoreErr(what, err)
	}
	changed, err := collectIDs(rows)
	if err != nil {
		return nil, wrapStoreErr(what, err)
	}
	return changed, nil
}

// readIDs reads the ids a fenced statement of a batch returned.
func readIDs(br pgx.BatchResults) (map[int64]bool, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	return collectIDs(rows)
}

func collectIDs(rows pgx.Rows) (map[int64]bool, error) {
	changed := map[int64]bool{}
	var id int64
	_, err := pgx.ForEachRow(rows, []any{&id}, func() error { changed[id] = true; return nil })
	return changed, err
}
