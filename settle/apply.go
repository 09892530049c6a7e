package settle

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/money"
)

// apply decides the effect of a record whose identity is new, against the
// locked state, and stages its ledger rows and outbox row. It returns the
// response to store.
func (st *txState) apply(ctx context.Context, tx pgx.Tx, d *decoded) (*Response, error) {
	r := &d.rec
	switch r.Kind {
	case fingerprint.KindUsage:
		a := st.accounts[accountKey{r.TenantID, r.Subject, r.Currency}]
		return st.settle(d, a, nil, Entry{Bucket: bucketBalance, Amount: money.MustParse(r.Amount).Neg().String()}), nil
	case fingerprint.KindGrant:
		a := st.accounts[accountKey{r.TenantID, r.Subject, r.Currency}]
		return st.settle(d, a, nil, Entry{Bucket: bucketBalance, Amount: r.Amount}), nil
	}
	return nil, fmt.Errorf("%s: kind %s is not implemented", d.id, r.Kind)
}

const (
	bucketBalance = "balance"
	bucketHeld    = "held"
)

// settle stages a settlement of d that writes entries to account a: the
// ledger rows, the account's new cached state and sequence, and the outbox
// message, which is also the stored response.
func (st *txState) settle(d *decoded, a *account, links *Links, entries ...Entry) *Response {
	if a == nil {
		panic(fmt.Sprintf("settle: %s: account not locked", d.id))
	}
	id := st.ids[0] // the id claim will give this identity
	for _, e := range entries {
		amt := money.MustParse(e.Amount)
		switch e.Bucket {
		case bucketBalance:
			a.balance, a.balanceDelta = a.balance.Add(amt), a.balanceDelta.Add(amt)
		case bucketHeld:
			a.held, a.heldDelta = a.held.Add(amt), a.heldDelta.Add(amt)
		}
		st.entries = append(st.entries, entryRow{identityID: id, accountID: a.id, tenant: a.key.tenant, bucket: e.Bucket, amount: amt})
	}
	if a.held.Sign() < 0 {
		panic(fmt.Sprintf("settle: %s: held amount of account %d would be %s", d.id, a.id, a.held))
	}
	a.seq++
	resp := st.response(d, OutcomeSettled, "")
	resp.SettlementID = settlementID(d.id)
	resp.Subject, resp.Currency = a.key.subject, a.key.currency
	resp.Entries, resp.Links = entries, links
	resp.BalanceAfter, resp.HeldAfter = a.balance.String(), a.held.String()
	resp.Sequence = a.seq
	resp.Late = st.closed[[2]string{d.rec.TenantID, d.rec.AccountPeriod}]
	return resp
}

// response starts the stored response of d.
func (st *txState) response(d *decoded, outcome Outcome, reason string) *Response {
	occurred := d.rec.OccurredAt
	return &Response{
		Version:      SchemaVersionOutput,
		Outcome:      outcome,
		Reason:       reason,
		Identity:     identityJSON(d.id),
		Kind:         string(d.rec.Kind),
		Subject:      d.rec.Subject,
		CommittedAt:  st.now,
		OccurredAt:   &occurred,
		SourceRecord: &Coordinates{d.in.Topic, d.in.Partition, d.in.Offset},
	}
}

// refuse returns a stored refusal: no effect, and every retry gets it again.
func (st *txState) refuse(d *decoded, reason, detail string) *Response {
	resp := st.response(d, OutcomeRefused, reason)
	resp.Detail = detail
	return resp
}

// quarantine opens a rule-based case for a new identity and returns its
// stored response.
func (st *txState) quarantine(ctx context.Context, tx pgx.Tx, d *decoded, reason, detail string) (*Response, error) {
	caseID, err := st.openCase(ctx, tx, d, reason, nil, detail)
	if err != nil {
		return nil, err
	}
	resp := st.response(d, OutcomeQuarantined, reason)
	resp.Detail, resp.CaseID = detail, caseID
	return resp, nil
}
