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
// inserted by one statement, existing ones read by one more, and a key
// whose lease expired is taken over by its own conditional update. A key
// that appears twice in reqs is claimed for its first request only; the
// later one sees that claim as another request would (busy, or a
// mismatch), as if the two had come one after the other.
func (s *Store) ClaimIdempotencyKeys(ctx context.Context, reqs []IdempotencyRequest) ([]IdempotencyClaim, error) {
	if len(reqs) > IdempotencyGroupKeysMax {
		return nil, fmt.Errorf("claim idempotency keys: %d keys, at most %d per group", len(reqs), IdempotencyGroupKeysMax)
	}
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("claim idempotency keys: request %d: %w", i, err)
		}
	}
	claims := make([]IdempotencyClaim, len(reqs))
	// Each key once, in its first request's place, sorted: two groups
	// that share keys wait on each other's index entries in one order.
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(reqs[a].TenantID, reqs[b].TenantID), cmp.Compare(reqs[a].Key, reqs[b].Key))
	})
	var firsts, rest []int
	for n, i := range order {
		if n > 0 && reqs[order[n-1]].TenantID == reqs[i].TenantID && reqs[order[n-1]].Key == reqs[i].Key {
			rest = append(rest, i)
			continue
		}
		firsts = append(firsts, i)
	}
	inserted, err := s.claimNew(ctx, reqs, firsts, claims)
	if err != nil {
		return nil, err
	}
	for _, i := range firsts {
		if !inserted[i] {
			rest = append(rest, i)
		}
	}
	slices.Sort(rest) // arrival order: a first request before its repeats
	if err := s.claimExisting(ctx, reqs, rest, claims); err != nil {
		return nil, err
	}
	return claims, nil
}

// claimNew inserts the keys reqs[firsts] in one statement and fills in the
// claims of those it inserted.
func (s *Store) claimNew(ctx context.Context, reqs []IdempotencyRequest, firsts []int, claims []IdempotencyClaim) (map[int]bool, error) {
	n := len(firsts)
	tenants, keys, hashes := make([]string, n), make([]string, n), make([][]byte, n)
	los, his, attempts, leases := make([]int32, n), make([]int32, n), make([]string, n), make([]int64, n)
	var flat [][]byte
	byKey := make(map[tenantKey]int, n)
	for j, i := range firsts {
		r := reqs[i]
		tenants[j], keys[j], hashes[j] = r.TenantID, r.Key, r.RequestHash
		los[j] = int32(len(flat) + 1) // PostgreSQL arrays start at 1
		flat = append(flat, r.Canonicals...)
		his[j] = int32(len(flat))
		attempts[j], leases[j] = newAttemptID(), r.Lease.Milliseconds()
		byKey[tenantKey{r.TenantID, r.Key}] = j
	}
	what := fmt.Sprintf("claim %d idempotency keys", n)
	rows, err := s.pool.Query(ctx, sqlIdempotencyClaimMany, tenants, keys, hashes, flat, los, his, attempts, leases)
	if err != nil {
		return nil, wrapStoreErr(what, err)
	}
	inserted := make(map[int]bool, n)
	var (
		id          int64
		tenant, key string
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &tenant, &key}, func() error {
		j, ok := byKey[tenantKey{tenant, key}]
		if !ok {
			return fmt.Errorf("inserted key tenant=%s key=%q was not asked for", tenant, key)
		}
		i := firsts[j]
		inserted[i] = true
		claims[i] = IdempotencyClaim{State: ClaimAcquired, KeyID: id, AttemptID: attempts[j], Attempts: 1}
		return nil
	})
	if err != nil {
		return nil, wrapStoreErr(what, err)
	}
	return inserted, nil
}

// claimExisting reads the keys of reqs[idx] in one statement and decides
// each as ClaimIdempotencyKey does; an expired claim is taken over, and a
// key whose state moved while it was read is claimed again alone.
func (s *Store) claimExisting(ctx context.Context, reqs []IdempotencyRequest, idx []int, claims []IdempotencyClaim) error {
	if len(idx) == 0 {
		return nil
	}
	tenants, keys := make([]string, len(idx)), make([]string, len(idx))
	for j, i := range idx {
		tenants[j], keys[j] = reqs[i].TenantID, reqs[i].Key
	}
	what := fmt.Sprintf("read %d idempotency keys", len(idx))
	rows, err := s.pool.Query(ctx, sqlIdempotencyLookupMany, tenants, keys)
	if err != nil {
		return wrapStoreErr(what, err)
	}
	type found struct {
		c         IdempotencyClaim
		hash      []byte
		status    string
		holder    string
		leaseLeft int64
	}
	seen := make([]*found, len(idx))
	var (
		ord int64
		f   found
	)
	_, err = pgx.ForEachRow(rows, []any{&ord, &f.c.KeyID, &f.hash, &f.c.StoredCanonicals, &f.status, &f.holder,
		&f.c.Attempts, &f.leaseLeft, &f.c.ResponseStatus, &f.c.Response}, func() error {
		if ord < 1 || int(ord) > len(idx) {
			return fmt.Errorf("key ordinal %d out of range", ord)
		}
		cp := f
		seen[ord-1] = &cp
		return nil
	})
	if err != nil {
		return wrapStoreErr(what, err)
	}
	for j, i := range idx {
		req, fd := reqs[i], seen[j]
		if fd == nil { // keys are never deleted: only a race with a claimer gets here
			if claims[i], err = s.ClaimIdempotencyKey(ctx, req); err != nil {
				return err
			}
			continue
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
			c, err = s.takeOver(ctx, req, c.KeyID, fd.holder)
			if err != nil {
				return err
			}
		}
		claims[i] = c
	}
	return nil
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

// CompleteIdempotencyKeys stores the answers of a group's claimed keys by
// one fenced write: lost[i] is true when answers[i]'s attempt no longer
// owns its claim (taken over, or finished), and nothing was stored for it.
// The other answers are stored, in the same transaction.
func (s *Store) CompleteIdempotencyKeys(ctx context.Context, answers []IdempotencyAnswer) (lost []bool, err error) {
	if len(answers) > IdempotencyGroupKeysMax {
		return nil, fmt.Errorf("complete idempotency keys: %d keys, at most %d per group", len(answers), IdempotencyGroupKeysMax)
	}
	n := len(answers)
	ids, attempts, statuses, bodies := make([]int64, n), make([]string, n), make([]int32, n), make([][]byte, n)
	for i, a := range answers {
		ids[i], attempts[i], statuses[i], bodies[i] = a.KeyID, a.AttemptID, int32(a.Status), a.Response
		if bodies[i] == nil {
			bodies[i] = []byte{}
		}
	}
	stored, err := s.fencedMany(ctx, fmt.Sprintf("complete %d idempotency keys", n), sqlIdempotencyCompleteMany, ids, attempts, statuses, bodies)
	if err != nil {
		return nil, err
	}
	lost = make([]bool, n)
	for i, id := range ids {
		lost[i] = !stored[id]
	}
	return lost, nil
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
	changed := map[int64]bool{}
	var id int64
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { changed[id] = true; return nil }); err != nil {
		return nil, wrapStoreErr(what, err)
	}
	return changed, nil
}
