package settle

import (
	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/state"
	"github.com/settlehq/settle/settle/message"
)

// txState is one transaction attempt: what it knows and will write
// (settle/internal/state), and the conflict cases its decisions open
// together once the batch is decided.
type txState struct {
	*state.State
	s *Store

	// pendingCases are the batch's fingerprint-mismatch cases, opened
	// together once it is decided (openPendingCases); caseDeliveries the
	// delivery rows and results that wait for their ids.
	pendingCases   []caseToOpen
	pendingByKey   map[caseKey]int
	caseDeliveries []caseDelivery

	// writeRider queues a Rider's writes on the commit's pipeline.
	writeRider func(p *pgq.Pipeline) error
}

// effect is what apply decided for a new identity.
type effect struct {
	resp     *message.Response
	a        *state.Account // the account it settled on, if any
	rootID   int64
	targetID int64
	wait     *state.RecKey // not nil: the target has not settled yet
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
	delivery int // index in State.Deliveries
	in       *message.Input
}

// caseToOpen is a conflict case to open with the fingerprint its key
// carries: the incoming record's, at the current canonical version.
type caseToOpen struct {
	ConflictCase
	fp uint64
}

// claim records a new identity with its stored response and returns the
// response bytes; a settlement that wrote ledger rows also goes to the
// settlements topic.
func (st *txState) claim(d *state.Item, idNum int64, eff *effect) []byte {
	resp := eff.resp
	body := resp.AppendJSON(make([]byte, 0, 640))
	st.Need.Add(state.RecordLock(d.ID.TenantID, d.ID.AccountPeriod, d.ID.RecordID), false)
	id := &state.IdentityRow{
		ID: idNum, Key: d.ID, FP: d.FP, Version: fingerprint.CanonicalVersion, Canonical: d.Canonical,
		Outcome: resp.Outcome, Reason: resp.Reason, Response: body, Subject: d.Rec.Subject, Currency: d.Rec.Currency,
		RootID: eff.rootID, TargetID: eff.targetID, IsNew: true, Item: d,
	}
	if resp.Outcome == message.OutcomeSettled {
		id.SettlementID = resp.SettlementID
	}
	if eff.a != nil {
		id.AccountID, id.Currency = eff.a.ID, eff.a.Key.Currency
	}
	st.Identities[d.ID] = id
	if resp.Outcome != message.OutcomeQuarantined {
		st.Index(id)
	}
	st.NewIdentities = append(st.NewIdentities, id)
	if resp.Outcome == message.OutcomeSettled && len(resp.Entries) > 0 {
		a := eff.a
		st.Outbox = append(st.Outbox, state.OutboxRow{
			Topic:    st.s.cfg.SettlementsTopic,
			Key:      []byte(a.Key.Tenant + "/" + a.Key.Subject + "/" + a.Key.Currency),
			Identity: id,
			// Only what the identity cannot give (relay/outbox assembles the rest).
			Headers:  pgq.EncodeHeaders(traceHeaders(d.In.Headers)),
			Sequence: resp.Sequence,
			Kind:     string(resp.Kind),
			Tenant:   a.Key.Tenant,
		})
	}
	return body
}
