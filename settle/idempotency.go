package settle

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/record"
)

// Idempotency keys of the HTTP edge (package edge), after the design in
// CONTRACT.md section 7 and issue 9: a key is claimed in its own short
// transaction before any work, the work (Settle) runs in its own, and the
// answer is stored by a fenced write that only the owning attempt can make.
// Why not one transaction around all three: a claim must be visible to a
// concurrent retry while the work runs, or the retry would block on the row
// instead of being told "busy". The work itself is safe without the fence:
// the records' coordinates derive from the key's row id, so a second
// execution of the same key is a redelivery that the settling core answers
// from what it stored.

var (
	sqlIdempotencyClaim          = mustQuery("idempotency_claim.sql")
	sqlIdempotencyLookup         = mustQuery("idempotency_lookup.sql")
	sqlIdempotencyTakeover       = mustQuery("idempotency_takeover.sql")
	sqlIdempotencyComplete       = mustQuery("idempotency_complete.sql")
	sqlIdempotencyRelease        = mustQuery("idempotency_release.sql")
	sqlIdempotencyIdentityLookup = mustQuery("idempotency_identity_lookup.sql")
)

// ErrClaimLost is returned by a fenced write (CompleteIdempotencyKey,
// CompleteWebhook, ...) whose attempt no longer owns the claim: its lease
// expired and another attempt took it over, or the claim is finished. The
// write changed nothing.
var ErrClaimLost = errors.New("claim lost: another attempt owns it now")

// IdempotencyKeyBytesMax bounds an Idempotency-Key (the column checks it too).
const IdempotencyKeyBytesMax = 255

// idempotencyClaimRoundsMax bounds the insert / read / take over rounds of
// one claim: each round that finds nothing is a race lost to a concurrent
// claimer, which leaves the key in a state the next read sees.
const idempotencyClaimRoundsMax = 4

// IdempotencyRequest is the request an Idempotency-Key is claimed for.
type IdempotencyRequest struct {
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

// ClaimState is what ClaimIdempotencyKey found.
type ClaimState int

// The claim states.
const (
	// ClaimAcquired: this attempt owns the key (new, or taken over from an
	// attempt whose lease expired: TakenOver). Do the work, then
	// CompleteIdempotencyKey.
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

// IdempotencyClaim is the answer of ClaimIdempotencyKey.
type IdempotencyClaim struct {
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
func (r IdempotencyRequest) Validate() error {
	switch {
	case r.TenantID == "":
		return errors.New("idempotency key: no tenant")
	case r.Key == "" || len(r.Key) > IdempotencyKeyBytesMax:
		return fmt.Errorf("idempotency key: must be 1 to %d bytes", IdempotencyKeyBytesMax)
	case len(r.RequestHash) == 0:
		return errors.New("idempotency key: no request hash")
	case len(r.Canonicals) == 0:
		return errors.New("idempotency key: no records")
	case r.Lease < time.Millisecond:
		return fmt.Errorf("idempotency key: lease %s is too short", r.Lease)
	}
	return nil
}

// ClaimIdempotencyKey claims req.Key of req.TenantID for a new attempt, or
// says why it cannot: the key is done (replay), busy, or was used for a
// different request. A claim left in progress past its lease is taken over
// by a conditional update that swaps in this attempt's id, so the attempt
// that held it can no longer complete it.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, req IdempotencyRequest) (IdempotencyClaim, error) {
	if err := req.Validate(); err != nil {
		return IdempotencyClaim{}, err
	}
	what := fmt.Sprintf("claim idempotency key tenant=%s key=%q", req.TenantID, req.Key)
	leaseMS := req.Lease.Milliseconds()
	for range idempotencyClaimRoundsMax {
		attempt := newAttemptID()
		var keyID int64
		err := s.pool.QueryRow(ctx, sqlIdempotencyClaim, req.TenantID, req.Key, req.RequestHash, req.Canonicals,
			len(req.Canonicals), attempt, leaseMS).Scan(&keyID)
		if err == nil {
			return IdempotencyClaim{State: ClaimAcquired, KeyID: keyID, AttemptID: attempt, Attempts: 1}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return IdempotencyClaim{}, wrapStoreErr(what, err)
		}
		var (
			c         IdempotencyClaim
			hash      []byte
			status    string
			holder    string
			leaseLeft int64
		)
		err = s.pool.QueryRow(ctx, sqlIdempotencyLookup, req.TenantID, req.Key).Scan(&c.KeyID, &hash,
			&c.StoredCanonicals, &status, &holder, &c.Attempts, &leaseLeft, &c.ResponseStatus, &c.Response)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // keys are never deleted; only a defect gets here, and the insert tells
		}
		if err != nil {
			return IdempotencyClaim{}, wrapStoreErr(what, err)
		}
		if !bytes.Equal(hash, req.RequestHash) && !sameCanonicals(c.StoredCanonicals, req.Canonicals) {
			c.State, c.Response, c.ResponseStatus = ClaimMismatch, nil, 0
			return c, nil
		}
		c.StoredCanonicals = nil
		switch {
		case status == "done":
			c.State = ClaimReplay
			return c, nil
		case leaseLeft > 0:
			c.State, c.RetryAfter = ClaimBusy, time.Duration(leaseLeft)*time.Millisecond
			return c, nil
		}
		// In progress past its lease: the attempt that holds it crashed or
		// stalled. Take it over; the holder's fenced writes fail from now on.
		var attempts int
		err = s.pool.QueryRow(ctx, sqlIdempotencyTakeover, c.KeyID, holder, attempt, leaseMS).Scan(&attempts)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // another retry took it over, or the holder finished: read again
		}
		if err != nil {
			return IdempotencyClaim{}, wrapStoreErr(what, err)
		}
		return IdempotencyClaim{State: ClaimAcquired, KeyID: c.KeyID, AttemptID: attempt, Attempts: attempts, TakenOver: true}, nil
	}
	return IdempotencyClaim{}, fmt.Errorf("%s: %w: lost %d rounds to concurrent claimers", what, ErrContention, idempotencyClaimRoundsMax)
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

// CompleteIdempotencyKey stores the answer of a claimed key: the fenced
// write. It returns ErrClaimLost, and stores nothing, when attemptID no
// longer owns the claim.
func (s *Store) CompleteIdempotencyKey(ctx context.Context, keyID int64, attemptID string, status int, response []byte) error {
	if response == nil {
		response = []byte{}
	}
	tag, err := s.pool.Exec(ctx, sqlIdempotencyComplete, keyID, attemptID, status, response)
	if err != nil {
		return wrapStoreErr(fmt.Sprintf("complete idempotency key %d", keyID), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("complete idempotency key %d attempt %s: %w", keyID, attemptID, ErrClaimLost)
	}
	return nil
}

// ReleaseIdempotencyKey ends the lease of a claim whose work failed, so the
// next retry takes it over at once. A claim the attempt no longer owns is
// left alone (ErrClaimLost).
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, keyID int64, attemptID string) error {
	tag, err := s.pool.Exec(ctx, sqlIdempotencyRelease, keyID, attemptID)
	if err != nil {
		return wrapStoreErr(fmt.Sprintf("release idempotency key %d", keyID), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("release idempotency key %d attempt %s: %w", keyID, attemptID, ErrClaimLost)
	}
	return nil
}

// KeyConflict is one record of a request that reused an Idempotency-Key
// with a different body.
type KeyConflict struct {
	Index  int                `json:"index"`
	CaseID int64              `json:"case_id,omitempty"`
	Diff   []record.FieldDiff `json:"diff"`
}

// OpenKeyConflictCases opens (or joins) a fingerprint_mismatch case for each
// record of a request that reused an Idempotency-Key (keyID) with other
// payloads: the case names the record the key first settled, with both
// canonical payloads and the per-field diff, so analysts see it beside the
// conflicts that came through Kafka. Records beyond the stored request's
// count get a diff against nothing and no case. Nothing is settled.
func (s *Store) OpenKeyConflictCases(ctx context.Context, keyID int64, stored, incoming [][]byte) ([]KeyConflict, error) {
	var out []KeyConflict
	for i, in := range incoming {
		var st []byte
		if i < len(stored) {
			st = stored[i]
		}
		if bytes.Equal(st, in) {
			continue
		}
		k := KeyConflict{Index: i}
		if st == nil {
			fields, err := record.CanonicalFields(in)
			if err != nil {
				return nil, fmt.Errorf("key conflict %d record %d: %w", keyID, i, err)
			}
			for f, v := range fields {
				k.Diff = append(k.Diff, record.FieldDiff{Field: f, Incoming: v})
			}
			out = append(out, k)
			continue
		}
		diff, err := record.Diff(st, in)
		if err != nil {
			return nil, fmt.Errorf("key conflict %d record %d: %w", keyID, i, err)
		}
		k.Diff = diff
		if k.CaseID, err = s.openKeyConflictCase(ctx, keyID, i, st, in, diff); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

func (s *Store) openKeyConflictCase(ctx context.Context, keyID int64, index int, stored, incoming []byte, diff []record.FieldDiff) (int64, error) {
	f, err := record.CanonicalFields(stored)
	if err != nil {
		return 0, fmt.Errorf("key conflict %d record %d: %w", keyID, index, err)
	}
	what := fmt.Sprintf("open key conflict case tenant=%s period=%s record=%s", f["tenant_id"], f["account_period"], f["record_id"])
	diffJSON, _ := json.Marshal(diff)
	detail := "an Idempotency-Key was reused with a different request body: nothing was settled for it"
	for range idempotencyClaimRoundsMax {
		var priorID, caseID int64
		if err := s.pool.QueryRow(ctx, sqlIdempotencyIdentityLookup, f["tenant_id"], f["account_period"], f["record_id"], f["kind"]).Scan(&priorID); err != nil {
			return 0, wrapStoreErr(what, err)
		}
		err := s.pool.QueryRow(ctx, sqlConflictCaseOpen, f["tenant_id"], f["account_period"], f["record_id"], f["kind"],
			ReasonFingerprintMismatch, int64(record.Sum(incoming)), priorID, stored, incoming, diffJSON, detail,
			HTTPTopic, HTTPConflictPartition, HTTPOffset(keyID, index)).Scan(&caseID)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // a concurrent request is opening the same case: read it again
		}
		if err != nil {
			return 0, wrapStoreErr(what, err)
		}
		return caseID, nil
	}
	return 0, fmt.Errorf("%s: %w", what, ErrContention)
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
		panic(fmt.Sprintf("settle: http record index %d out of range", index))
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
