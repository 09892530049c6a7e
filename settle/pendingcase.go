package settle

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// pendingCase is a fingerprint-mismatch case a batch decided: a repeat of a
// known identity with another payload. Deciding it needs no case id (the
// repeat claims nothing), so the batch's cases are opened together once
// every record is decided (openPendingCases), in one round trip instead of
// one each: a producer that re-sends changed payloads does not slow its
// partition by a round trip per record.
type pendingCase struct {
	key      caseKey
	d        *decoded
	priorID  int64
	stored   []byte
	incoming []byte
	diff     []byte
}

// caseKey is what makes a case one: the identity, the reason and the
// incoming payload's fingerprint (conflict_cases_key).
type caseKey struct {
	id     record.Identity
	reason string
	fp     uint64
}

// caseDelivery is a delivery row and a result waiting for their case id.
type caseDelivery struct {
	pending  int // index in txState.pendingCases
	delivery int // index in txState.deliveries
	in       *Input
}

// deferMismatch records a fingerprint mismatch of d against the stored
// canonical payload, for its case to be opened with the batch's others; a
// second delivery of the same payload in the batch joins the first's case.
func (st *txState) deferMismatch(d *decoded, priorID int64, stored, incoming []byte) error {
	k := caseKey{id: d.id, reason: message.ReasonFingerprintMismatch, fp: d.fp}
	i, ok := st.pendingByKey[k]
	if !ok {
		diff, err := record.Diff(stored, incoming)
		if err != nil {
			return fmt.Errorf("%s: diff: %w", d.id, err)
		}
		diffJSON, err := json.Marshal(diff)
		if err != nil {
			return fmt.Errorf("%s: diff: %w", d.id, err)
		}
		i = len(st.pendingCases)
		st.pendingCases = append(st.pendingCases, pendingCase{key: k, d: d, priorID: priorID, stored: stored, incoming: incoming, diff: diffJSON})
		if st.pendingByKey == nil {
			st.pendingByKey = map[caseKey]int{}
		}
		st.pendingByKey[k] = i
	}
	st.caseDeliveries = append(st.caseDeliveries, caseDelivery{pending: i, delivery: len(st.deliveries), in: d.in})
	return nil
}

// openPendingCases opens (or finds) the batch's fingerprint-mismatch cases
// in one round trip, puts their ids on the delivery rows that wait for
// them, and returns the case id of each input record that conflicted.
func (st *txState) openPendingCases(ctx context.Context) (map[*Input]int64, error) {
	if len(st.pendingCases) == 0 {
		return nil, nil
	}
	var p db.ConflictCaseInsertManyParams
	for _, c := range st.pendingCases {
		d := c.d
		p.TenantID, p.AccountPeriod = append(p.TenantID, d.id.TenantID), append(p.AccountPeriod, d.id.AccountPeriod)
		p.RecordID, p.Operation = append(p.RecordID, d.id.RecordID), append(p.Operation, string(d.id.Operation))
		p.Reason, p.IncomingFingerprint = append(p.Reason, c.key.reason), append(p.IncomingFingerprint, int64(d.fp))
		p.IdentityID, p.StoredCanonical = append(p.IdentityID, c.priorID), append(p.StoredCanonical, c.stored)
		p.IncomingCanonical, p.Diff = append(p.IncomingCanonical, c.incoming), append(p.Diff, c.diff)
		p.Detail = append(p.Detail, "same identity, different payload")
		p.Topic, p.Partition, p.Offset = append(p.Topic, d.in.Topic), append(p.Partition, d.in.Partition), append(p.Offset, d.in.Offset)
	}
	// The insert and the read of every case's id in one round trip: the
	// read, a statement of its own, sees the rows the insert wrote and the
	// cases a concurrent opener committed while the insert waited for it.
	pl := db.NewPipeline(st.tx)
	q := db.New(pl)
	_ = q.ConflictCaseInsertMany(ctx, p)
	rows, err := db.Rows(q.ConflictCaseIDs(ctx, []db.ConflictCaseIDsParams{{TenantID: p.TenantID, AccountPeriod: p.AccountPeriod,
		RecordID: p.RecordID, Operation: p.Operation, Reason: p.Reason, IncomingFingerprint: p.IncomingFingerprint}}).Query)
	if serr := pl.Send(ctx); err == nil {
		err = serr
	}
	if err != nil {
		return nil, fmt.Errorf("open %d conflict cases: %w", len(st.pendingCases), err)
	}
	ids := make([]int64, len(st.pendingCases))
	for _, r := range rows {
		if r.ID == 0 {
			return nil, errLostRace // a case this statement cannot see: try the batch again
		}
		ids[r.N-1] = r.ID
	}
	byInput := make(map[*Input]int64, len(st.caseDeliveries))
	for _, cd := range st.caseDeliveries {
		id := ids[cd.pending]
		st.deliveries[cd.delivery].caseID = id
		byInput[cd.in] = id
	}
	return byInput, nil
}
