package settle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/internal/state"
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
	Diff             []fingerprint.FieldDiff
	Detail           string
	// Source names where the refused record came from.
	Source message.Coordinates
}

// conflictCaseOpenRoundsMax bounds the rounds of OpenConflictCase: each
// round that finds nothing lost a race to a concurrent opener, whose case
// the next round finds.
const conflictCaseOpenRoundsMax = 4

// OpenConflictCase opens c, or joins the open case of the same identity,
// reason and incoming payload, and returns its id, in a round trip of its
// own. It settles nothing.
func (s *Store) OpenConflictCase(ctx context.Context, c ConflictCase) (int64, error) {
	what := "open conflict case " + c.Identity.String()
	one := []caseToOpen{{ConflictCase: c, fp: fingerprint.Sum(c.Incoming)}}
	for range conflictCaseOpenRoundsMax {
		ids, err := openCases(ctx, s.pool, one)
		if errors.Is(err, state.ErrLostRace) {
			continue // a concurrent opener of the same case has not committed yet: read again
		}
		if err != nil {
			return 0, dberr.Wrap(what, err)
		}
		return ids[0], nil
	}
	return 0, fmt.Errorf("%s: %w", what, dberr.ErrContention)
}

// caseOf is the case d's delivery opens. stored is the canonical payload it
// conflicts with, or nil for a case without one (a rule-based quarantine,
// an orphan).
func caseOf(d *state.Item, reason string, priorID int64, stored, incoming []byte, detail string) (caseToOpen, error) {
	c := caseToOpen{ConflictCase: ConflictCase{Identity: d.ID, Reason: reason, IdentityID: priorID, Stored: stored,
		Incoming: incoming, Detail: detail, Source: d.In.Coordinates()}, fp: d.FP}
	if stored != nil {
		diff, err := fingerprint.Diff(stored, incoming)
		if err != nil {
			return c, fmt.Errorf("%s: diff: %w", d.ID, err)
		}
		c.Diff = diff
	}
	return c, nil
}

// openCases opens cs, or finds the case there for the same identity,
// reason and incoming payload, in one round trip on on (a settling
// transaction, or the pool: one implicit transaction), and returns their
// ids in order. The ids are read by a statement of its own after the
// insert, so it sees the rows the insert wrote and those a concurrent
// opener committed while the insert waited for it; a case it still cannot
// see is state.ErrLostRace (try again).
func openCases(ctx context.Context, on pgq.BatchSender, cs []caseToOpen) ([]int64, error) {
	var p db.ConflictCaseInsertManyParams
	for _, c := range cs {
		diff := []byte("[]")
		if len(c.Diff) > 0 {
			var err error
			if diff, err = json.Marshal(c.Diff); err != nil {
				return nil, fmt.Errorf("%s: diff: %w", c.Identity, err)
			}
		}
		id, src := c.Identity, c.Source
		p.TenantID, p.AccountPeriod = append(p.TenantID, id.TenantID), append(p.AccountPeriod, id.AccountPeriod)
		p.RecordID, p.Operation = append(p.RecordID, id.RecordID), append(p.Operation, string(id.Operation))
		p.Reason, p.IncomingFingerprint = append(p.Reason, c.Reason), append(p.IncomingFingerprint, int64(c.fp))
		p.IdentityID, p.StoredCanonical = append(p.IdentityID, c.IdentityID), append(p.StoredCanonical, c.Stored)
		p.IncomingCanonical, p.Diff = append(p.IncomingCanonical, c.Incoming), append(p.Diff, diff)
		p.Detail = append(p.Detail, c.Detail)
		p.Topic, p.Partition, p.Offset = append(p.Topic, src.Topic), append(p.Partition, src.Partition), append(p.Offset, src.Offset)
	}
	pl := pgq.NewPipeline(on)
	q := db.New(pl)
	_ = q.ConflictCaseInsertMany(ctx, p)
	rows, err := pgq.Rows(q.ConflictCaseIDs(ctx, []db.ConflictCaseIDsParams{{TenantID: p.TenantID, AccountPeriod: p.AccountPeriod,
		RecordID: p.RecordID, Operation: p.Operation, Reason: p.Reason, IncomingFingerprint: p.IncomingFingerprint}}).Query)
	if serr := pl.Send(ctx); err == nil {
		err = serr
	}
	if err != nil {
		return nil, fmt.Errorf("open %d conflict cases: %w", len(cs), err)
	}
	ids := make([]int64, len(cs))
	for _, r := range rows {
		if r.ID == 0 {
			return nil, state.ErrLostRace
		}
		ids[r.N-1] = r.ID
	}
	return ids, nil
}

// openCase opens (or joins) the conflict case of one record, now: its id
// goes into the response being decided. stored is the canonical payload it
// conflicts with, or nil for a rule-based quarantine.
func (st *txState) openCase(ctx context.Context, d *state.Item, reason string, priorID int64, stored, incoming []byte, detail string) (int64, error) {
	c, err := caseOf(d, reason, priorID, stored, incoming, detail)
	if err != nil {
		return 0, err
	}
	ids, err := openCases(ctx, st.Tx, []caseToOpen{c})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", d.ID, err)
	}
	return ids[0], nil
}
