// Package idempotency owns the Idempotency-Keys of the HTTP edge's records
// API (package edge/ingest): table idempotency_keys, one row per tenant and
// key, holding the request it was first used for (the SHA-256 of its body
// and the canonical form of each record), the attempt that holds its claim
// under a lease, and the answer stored once the work is done.
//
// A key is claimed in its own short transaction before any work, the work
// (settle.Store.Settle) runs in its own, and the answer is stored by a
// fenced write that only the owning attempt can make (dberr.ErrClaimLost
// otherwise). Why not one transaction around all three: a claim must be
// visible to a concurrent retry while the work runs, or the retry would
// block on the row instead of being told "busy". The work itself is safe
// without the fence: the records' coordinates derive from the key's row id
// (HTTPOffset), so a second execution of the same key is a redelivery that
// the settling transaction answers from what it stored. A claim left in
// progress past its lease is taken over by a conditional update that swaps
// in the new attempt's id, so the attempt that held it can no longer
// complete it. The group calls (group.go) do the same for the keys of many
// requests in one round trip.
//
// Its statements are the files in sql/, run through the generated queries.
// It never settles anything and never speaks HTTP; a reused key's conflict
// cases are opened by settle.Store.OpenConflictCase. Its errors say what
// was being done and carry dberr.ErrUnavailable when the database itself
// failed (dberr.Wrap).
package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// Store reads and writes the Idempotency-Keys of one settle database.
type Store struct {
	pool   *pgxpool.Pool
	settle *settle.Store
}

// New returns the Idempotency-Keys of the database of s, over its pool.
func New(s *settle.Store) *Store { return &Store{pool: s.Pool(), settle: s} }

// KeyBytesMax bounds an Idempotency-Key (the column checks it too).
const KeyBytesMax = 255

// claimRoundsMax bounds the insert / read / take over rounds of one claim:
// each round that finds nothing is a race lost to a concurrent claimer,
// which leaves the key in a state the next read sees.
const claimRoundsMax = 4

// Request is the request an Idempotency-Key is claimed for.
type Request struct {
	TenantID string
	Key      string
	// RequestHash is the SHA-256 of the request body: the fast filter.
	RequestHash []byte
	// Canonicals are the canonical forms of the request's records, in order:
	// they decide whether a request whose bytes differ is the same request.
	Canonicals [][]byte
	// Lease is how long the claim is the caller's alone. Past it, a retry
	// takes the key over.
	Lease time.Duration
}

// ClaimState is what Store.Claim found.
type ClaimState int

// The claim states.
const (
	// ClaimAcquired: this attempt owns the key (new, or taken over from an
	// attempt whose lease expired: TakenOver). Do the work, then
	// Store.Complete.
	ClaimAcquired ClaimState = iota + 1
	// ClaimReplay: the key is done; Response is the stored answer.
	ClaimReplay
	// ClaimBusy: another attempt holds a live lease; RetryAfter says when it
	// runs out.
	ClaimBusy
	// ClaimMismatch: the key was used for another request;
	// StoredCanonicals hold that request's records.
	ClaimMismatch
)

// Claim is the answer of Store.Claim.
type Claim struct {
	State ClaimState
	// KeyID is the key's row id: stable for the key's whole life.
	KeyID int64
	// AttemptID names this attempt's claim (ClaimAcquired only).
	AttemptID string
	// Attempts counts the attempts that claimed the key, this one included.
	Attempts  int
	TakenOver bool

	ResponseStatus int    // ClaimReplay
	Response       []byte // ClaimReplay: byte for byte what was answered

	RetryAfter time.Duration // ClaimBusy

	StoredCanonicals [][]byte // ClaimMismatch
}

// Validate reports a request that cannot be claimed.
func (r Request) Validate() error {
	switch {
	case r.TenantID == "":
		return errors.New("idempotency key: no tenant")
	case r.Key == "" || len(r.Key) > KeyBytesMax:
		return fmt.Errorf("idempotency key: must be 1 to %d bytes", KeyBytesMax)
	case len(r.RequestHash) == 0:
		return errors.New("idempotency key: no request hash")
	case len(r.Canonicals) == 0:
		return errors.New("idempotency key: no records")
	case r.Lease < time.Millisecond:
		return fmt.Errorf("idempotency key: lease %s is too short", r.Lease)
	}
	return nil
}

// Claim claims req.Key of req.TenantID for a new attempt, or says why it
// cannot: the key is done (replay), busy, or was used for a different
// request. A claim left in progress past its lease is taken over by a
// conditional update that swaps in this attempt's id, so the attempt that
// held it can no longer complete it.
func (s *Store) Claim(ctx context.Context, req Request) (Claim, error) {
	if err := req.Validate(); err != nil {
		return Claim{}, err
	}
	what := fmt.Sprintf("claim idempotency key tenant=%s key=%q", req.TenantID, req.Key)
	leaseMS := req.Lease.Milliseconds()
	q := db.On(s.pool)
	for range claimRoundsMax {
		attempt := newAttemptID()
		keyID, err := q.IdempotencyClaim(ctx, db.IdempotencyClaimParams{TenantID: req.TenantID, Key: req.Key,
			RequestHash: req.RequestHash, Canonicals: req.Canonicals, Records: int32(len(req.Canonicals)),
			AttemptID: attempt, LeaseMs: leaseMS})
		if err == nil {
			return Claim{State: ClaimAcquired, KeyID: keyID, AttemptID: attempt, Attempts: 1}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Claim{}, dberr.Wrap(what, err)
		}
		row, err := q.IdempotencyLookup(ctx, db.IdempotencyLookupParams{TenantID: req.TenantID, Key: req.Key})
		if errors.Is(err, pgx.ErrNoRows) {
			continue // keys are never deleted; only a defect gets here, and the insert tells
		}
		if err != nil {
			return Claim{}, dberr.Wrap(what, err)
		}
		c := Claim{KeyID: row.ID, Attempts: int(row.Attempts), ResponseStatus: int(row.ResponseStatus),
			Response: row.Response, StoredCanonicals: row.Canonicals}
		if !bytes.Equal(row.RequestHash, req.RequestHash) && !sameCanonicals(c.StoredCanonicals, req.Canonicals) {
			c.State, c.Response, c.ResponseStatus = ClaimMismatch, nil, 0
			return c, nil
		}
		c.StoredCanonicals = nil
		switch {
		case row.Status == "done":
			c.State = ClaimReplay
			return c, nil
		case row.LeaseLeftMs > 0:
			c.State, c.RetryAfter = ClaimBusy, time.Duration(row.LeaseLeftMs)*time.Millisecond
			return c, nil
		}
		// In progress past its lease: the attempt that holds it crashed or
		// stalled. Take it over; the holder's fenced writes fail from now on.
		attempts, err := q.IdempotencyTakeover(ctx, db.IdempotencyTakeoverParams{ID: c.KeyID, Holder: row.Holder,
			AttemptID: attempt, LeaseMs: leaseMS})
		if errors.Is(err, pgx.ErrNoRows) {
			continue // another retry took it over, or the holder finished: read again
		}
		if err != nil {
			return Claim{}, dberr.Wrap(what, err)
		}
		return Claim{State: ClaimAcquired, KeyID: c.KeyID, AttemptID: attempt, Attempts: int(attempts), TakenOver: true}, nil
	}
	return Claim{}, fmt.Errorf("%s: %w: lost %d rounds to concurrent claimers", what, dberr.ErrContention, claimRoundsMax)
}

func sameCanonicals(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// Complete stores the answer of a claimed key: the fenced write. It
// returns dberr.ErrClaimLost, and stores nothing, when attemptID no
// longer owns the claim.
func (s *Store) Complete(ctx context.Context, keyID int64, attemptID string, status int, response []byte) error {
	if response == nil {
		response = []byte{}
	}
	n, err := db.On(s.pool).IdempotencyComplete(ctx, db.IdempotencyCompleteParams{ID: keyID, AttemptID: attemptID,
		ResponseStatus: int32(status), Response: response})
	if err != nil {
		return dberr.Wrap(fmt.Sprintf("complete idempotency key %d", keyID), err)
	}
	if n == 0 {
		return fmt.Errorf("complete idempotency key %d attempt %s: %w", keyID, attemptID, dberr.ErrClaimLost)
	}
	return nil
}

// Release ends the lease of a claim whose work failed, so the next retry
// takes it over at once. A claim the attempt no longer owns is left alone
// (dberr.ErrClaimLost).
func (s *Store) Release(ctx context.Context, keyID int64, attemptID string) error {
	n, err := db.On(s.pool).IdempotencyRelease(ctx, db.IdempotencyReleaseParams{ID: keyID, AttemptID: attemptID})
	if err != nil {
		return dberr.Wrap(fmt.Sprintf("release idempotency key %d", keyID), err)
	}
	if n == 0 {
		return fmt.Errorf("release idempotency key %d attempt %s: %w", keyID, attemptID, dberr.ErrClaimLost)
	}
	return nil
}

// Conflict is one record of a request that reused an Idempotency-Key with
// a different body.
type Conflict struct {
	Index  int                `json:"index"`
	CaseID int64              `json:"case_id,omitempty"`
	Diff   []record.FieldDiff `json:"diff"`
}

// OpenConflictCases opens (or joins) a fingerprint_mismatch case for each
// record of a request that reused an Idempotency-Key (keyID) with another
// payload for the same record (identity): the case names the record the
// key first settled, with both canonical payloads and the per-field diff,
// so analysts see it beside the conflicts that came through Kafka. A
// record with another identity than the stored one at its index, or
// beyond the stored request's count, is no conflict of a record but a new
// record under a used key: it gets its diff and no case (accepted, a case
// would correct the key's first record by the other's amount). Nothing is
// settled.
func (s *Store) OpenConflictCases(ctx context.Context, keyID int64, stored, incoming [][]byte) ([]Conflict, error) {
	var out []Conflict
	for i, in := range incoming {
		var st []byte
		if i < len(stored) {
			st = stored[i]
		}
		if bytes.Equal(st, in) {
			continue
		}
		inFields, err := record.CanonicalFields(in)
		if err != nil {
			return nil, fmt.Errorf("key conflict %d record %d: %w", keyID, i, err)
		}
		k := Conflict{Index: i}
		if st == nil {
			for f, v := range inFields {
				k.Diff = append(k.Diff, record.FieldDiff{Field: f, Incoming: v})
			}
			out = append(out, k)
			continue
		}
		stFields, err := record.CanonicalFields(st)
		if err != nil {
			return nil, fmt.Errorf("key conflict %d record %d: %w", keyID, i, err)
		}
		if k.Diff, err = record.Diff(st, in); err != nil {
			return nil, fmt.Errorf("key conflict %d record %d: %w", keyID, i, err)
		}
		if id := identityOf(stFields); id == identityOf(inFields) {
			if k.CaseID, err = s.openConflictCase(ctx, keyID, i, id, st, in, k.Diff); err != nil {
				return nil, err
			}
		}
		out = append(out, k)
	}
	return out, nil
}

// identityOf is the identity a canonical payload's fields name.
func identityOf(f map[string]string) record.Identity {
	return record.Identity{TenantID: f["tenant_id"], AccountPeriod: f["account_period"], RecordID: f["record_id"],
		Operation: record.Kind(f["kind"])}
}

// conflictDetail is the detail of every case of a reused key.
const conflictDetail = "an Idempotency-Key was reused with a different request body: nothing was settled for it"

func (s *Store) openConflictCase(ctx context.Context, keyID int64, index int, id record.Identity, stored, incoming []byte, diff []record.FieldDiff) (int64, error) {
	prior, err := db.On(s.pool).IdempotencyIdentityLookup(ctx, db.IdempotencyIdentityLookupParams{TenantID: id.TenantID,
		AccountPeriod: id.AccountPeriod, RecordID: id.RecordID, Operation: string(id.Operation)})
	if err != nil {
		return 0, dberr.Wrap(fmt.Sprintf("key conflict %d record %d: find %s", keyID, index, id), err)
	}
	caseID, err := s.settle.OpenConflictCase(ctx, settle.ConflictCase{Identity: id, Reason: message.ReasonFingerprintMismatch,
		IdentityID: prior, Stored: stored, Incoming: incoming, Diff: diff, Detail: conflictDetail,
		Source: message.Coordinates{Topic: HTTPTopic, Partition: HTTPConflictPartition, Offset: HTTPOffset(keyID, index)}})
	if err != nil {
		return 0, fmt.Errorf("key conflict %d record %d: %w", keyID, index, err)
	}
	return caseID, nil
}

// The coordinates of records that came over HTTP. Partition 0 holds the
// records of idempotency keys; partition 1 names, in conflict cases, the
// request that reused a key with another body.
const (
	HTTPTopic             = "http"
	HTTPSettlePartition   = 0
	HTTPConflictPartition = 1
	// HTTPBatchRecordsMax is the largest batch one key may carry: the index
	// of a record is the low 10 bits of its offset.
	HTTPBatchRecordsMax = 1 << 10
)

// HTTPOffset is the offset of record index of the request claimed as keyID:
// unique per record and stable for the key's life, so that every attempt of
// one key settles under the same coordinates.
func HTTPOffset(keyID int64, index int) int64 {
	if index < 0 || index >= HTTPBatchRecordsMax {
		panic(fmt.Sprintf("idempotency: http record index %d out of range", index))
	}
	return keyID*HTTPBatchRecordsMax + int64(index)
}

// newAttemptID returns a random (version 4) UUID naming one attempt.
func newAttemptID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
