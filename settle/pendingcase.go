package settle

import (
	"context"

	"github.com/settlehq/settle/settle/internal/state"
	"github.com/settlehq/settle/settle/message"
)

// A fingerprint mismatch (a repeat of a known identity with another
// payload) claims nothing, so deciding it needs no case id: the batch's
// mismatch cases are opened together once every record is decided
// (openPendingCases), in one round trip instead of one each, and a
// producer that re-sends changed payloads does not slow its partition by a
// round trip per record. Cases whose id goes into a stored response (a
// rule-based quarantine, an orphan) are opened as they are decided
// (openCase).

// deferMismatch records a fingerprint mismatch of d against the stored
// canonical payload, for its case to be opened with the batch's others; a
// second delivery of the same payload in the batch joins the first's case.
func (st *txState) deferMismatch(d *state.Item, priorID int64, stored, incoming []byte) error {
	k := caseKey{id: d.ID, reason: message.ReasonFingerprintMismatch, fp: d.FP}
	i, ok := st.pendingByKey[k]
	if !ok {
		c, err := caseOf(d, k.reason, priorID, stored, incoming, "same identity, different payload")
		if err != nil {
			return err
		}
		i = len(st.pendingCases)
		st.pendingCases = append(st.pendingCases, c)
		if st.pendingByKey == nil {
			st.pendingByKey = map[caseKey]int{}
		}
		st.pendingByKey[k] = i
	}
	st.caseDeliveries = append(st.caseDeliveries, caseDelivery{pending: i, delivery: len(st.Deliveries), in: d.In})
	return nil
}

// openPendingCases opens (or finds) the batch's fingerprint-mismatch cases
// in one round trip, puts their ids on the delivery rows that wait for
// them, and returns the case id of each input record that conflicted.
func (st *txState) openPendingCases(ctx context.Context) (map[*message.Input]int64, error) {
	if len(st.pendingCases) == 0 {
		return nil, nil
	}
	ids, err := openCases(ctx, st.Tx, st.pendingCases)
	if err != nil {
		return nil, err
	}
	byInput := make(map[*message.Input]int64, len(st.caseDeliveries))
	for _, cd := range st.caseDeliveries {
		id := ids[cd.pending]
		st.Deliveries[cd.delivery].CaseID = id
		byInput[cd.in] = id
	}
	return byInput, nil
}
