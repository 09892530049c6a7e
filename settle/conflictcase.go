package settle

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// ConflictCase is a conflict case about a record that no settling
// transaction handled: one refused before it reached one, such as a record
// of a request that reused an Idempotency-Key with another body.
type ConflictCase struct {
	Identity record.Identity
	Reason   string
	// IdentityID is the identity row the record collides with; 0 when the
	// record never claimed one.
	IdentityID int64
	// Stored and Incoming are the canonical payloads: the one settled (or
	// first sent) and the one refused. Incoming's fingerprint identifies
	// the case.
	Stored, Incoming []byte
	Diff             []record.FieldDiff
	Detail           string
	// Source names where the refused record came from.
	Source message.Coordinates
}

// conflictCaseOpenRoundsMax bounds the rounds of OpenConflictCase: each
// round that finds nothing lost a race to a concurrent opener, whose case
// the next round finds.
const conflictCaseOpenRoundsMax = 4

// OpenConflictCase opens c, or joins the open case of the same identity,
// reason and incoming payload, and returns its id, in a statement of its
// own. It settles nothing.
func (s *Store) OpenConflictCase(ctx context.Context, c ConflictCase) (int64, error) {
	what := "open conflict case " + c.Identity.String()
	diff, err := json.Marshal(c.Diff)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	p := db.ConflictCaseOpenParams{
		TenantID: c.Identity.TenantID, AccountPeriod: c.Identity.AccountPeriod, RecordID: c.Identity.RecordID,
		Operation: string(c.Identity.Operation), Reason: c.Reason, IncomingFingerprint: int64(record.Sum(c.Incoming)),
		IdentityID: c.IdentityID, StoredCanonical: c.Stored, IncomingCanonical: c.Incoming, Diff: diff, Detail: c.Detail,
		Topic: c.Source.Topic, Partition: c.Source.Partition, Offset: c.Source.Offset,
	}
	for range conflictCaseOpenRoundsMax {
		ids, err := db.On(s.pool).ConflictCaseOpen(ctx, p)
		if err != nil {
			return 0, dberr.Wrap(what, err)
		}
		if len(ids) > 0 {
			return ids[0], nil
		}
		// A concurrent opener of the same case has not committed yet:
		// read again.
	}
	return 0, fmt.Errorf("%s: %w", what, dberr.ErrContention)
}
