// Package idempotency owns the Idempotency-Keys of the HTTP edge's records
// API (package edge/ingest): table idempotency_keys, one row per tenant and
// key, holding the request it was first used for (the SHA-256 of its body
// and the canonical form of each record) and the answer its records
// settled with.
//
// A key is claimed, its records settled and its answer stored in one
// transaction: the settling transaction of its group (group.go, a
// settle.Rider). The transaction takes the key's advisory lock without
// waiting, so that a concurrent retry is told "busy" at once instead of
// blocking, reads the key, and inserts it done with its answer in the
// commit that settles its records. A key is never in progress: absent, or
// done with the answer of what settled. The records' coordinates derive
// from the key's row id (HTTPOffset), reserved before the row is written,
// so a record is settled under its key's coordinates only. Keys an earlier
// version of settle left in progress (it claimed a key in a transaction of
// its own, under a lease) are taken over once their lease ends, by a
// conditional update that swaps in the new attempt's id, and settled again
// at their coordinates, which the settling transaction answers from what
// it stored.
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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/edge/idempotency/internal/db"
	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/dberr"
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

// Request is the request an Idempotency-Key is claimed for.
type Request struct {
	TenantID string
	Key      string
	// RequestHash is the SHA-256 of the request body: the fast filter.
	RequestHash []byte
	// Canonicals are the canonical forms of the request's records, in order:
	// they decide whether a request whose bytes differ is the same request.
	Canonicals [][]byte
	// TakeOver, when set, is the claim of a key an earlier version left in
	// progress past its lease (ClaimTakeOver): the request settles again at
	// the key's coordinates.
	TakeOver *Claim
}

// ClaimState is what became of a request's key in its group.
type ClaimState int

// The claim states.
const (
	// ClaimAcquired: the request's records settled under the key (new, or
	// taken over: TakenOver) and its answer, Response, was stored with them.
	ClaimAcquired ClaimState = iota + 1
	// ClaimReplay: the key is done; Response is the stored answer.
	ClaimReplay
	// ClaimBusy: another transaction holds the key (or an earlier
	// version's claim its lease); RetryAfter says when to ask again.
	ClaimBusy
	// ClaimMismatch: the key was used for another request;
	// StoredCanonicals hold that request's records.
	ClaimMismatch
	// ClaimTakeOver: an earlier version left the key in progress and its
	// lease ended. Settle the request again in a group of its own, with
	// Request.TakeOver set to this claim.
	ClaimTakeOver
)

// Claim is what became of a request's key.
type Claim struct {
	State ClaimState
	// KeyID is the key's row id: stable for the key's whole life.
	KeyID int64
	// Attempts counts the attempts that claimed the key, this one included.
	Attempts  int
	TakenOver bool
	Holder    string // ClaimTakeOver: the attempt that holds the expired claim

	ResponseStatus int    // ClaimAcquired, ClaimReplay
	Response       []byte // ClaimAcquired, ClaimReplay: byte for byte what is answered

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
	case len(r.Canonicals) > HTTPBatchRecordsMax:
		return fmt.Errorf("idempotency key: %d records, at most %d", len(r.Canonicals), HTTPBatchRecordsMax)
	}
	return nil
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

// Conflict is one record of a request that reused an Idempotency-Key with
// a different body.
type Conflict struct {
	Index  int                     `json:"index"`
	CaseID int64                   `json:"case_id,omitempty"`
	Diff   []fingerprint.FieldDiff `json:"diff"`
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
		inFields, err := fingerprint.CanonicalFields(in)
		if err != nil {
			return nil, fmt.Errorf("key conflict %d record %d: %w", keyID, i, err)
		}
		k := Conflict{Index: i}
		if st == nil {
			for f, v := range inFields {
				k.Diff = append(k.Diff, fingerprint.FieldDiff{Field: f, Incoming: v})
			}
			out = append(out, k)
			continue
		}
		stFields, err := fingerprint.CanonicalFields(st)
		if err != nil {
			return nil, fmt.Errorf("key conflict %d record %d: %w", keyID, i, err)
		}
		if k.Diff, err = fingerprint.Diff(st, in); err != nil {
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

func (s *Store) openConflictCase(ctx context.Context, keyID int64, index int, id record.Identity, stored, incoming []byte, diff []fingerprint.FieldDiff) (int64, error) {
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
