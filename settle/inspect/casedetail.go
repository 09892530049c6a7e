package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// Case is one conflict case in full: both canonical payloads, the fields
// side by side, every delivery that joined it and its resolution.
type Case struct {
	CaseSummary
	IncomingFingerprint string          `json:"incoming_fingerprint"` // xxhash, hex
	IdentityID          int64           `json:"identity_id,omitempty"`
	Stored              json.RawMessage `json:"stored"` // canonical form; null for a rule-based case
	Incoming            json.RawMessage `json:"incoming"`
	Fields              []CaseField     `json:"fields"`
	Differing           []string        `json:"differing"` // the fields that differ
	Deliveries          []Delivery      `json:"deliveries"`
	Resolution          *CaseResolution `json:"resolution,omitempty"`
	// Chain is the chain the case is about as it is now (the stored
	// record's, or the one the incoming correction names): what an
	// accepted resolution restates. Nil when the record names none.
	Chain *CaseChain `json:"chain,omitempty"`
}

// CaseChain is a chain's state beside a case: an accepted resolution states
// a new total against it and leaves its version to the producer.
type CaseChain struct {
	NetCharge      string `json:"net_charge"`
	Currency       string `json:"currency"`
	Version        int64  `json:"finalization_version"`
	Refunded       bool   `json:"refunded"` // refunded and not reclaimed: cannot be restated
	RootSettlement string `json:"root_settlement_id,omitempty"`
}

// CaseField is one field of the side-by-side view. A field absent on one
// side has Present* false there.
type CaseField struct {
	Field           string `json:"field"`
	Stored          string `json:"stored"`
	Incoming        string `json:"incoming"`
	StoredPresent   bool   `json:"stored_present"`
	IncomingPresent bool   `json:"incoming_present"`
	Differs         bool   `json:"differs"`
}

// Delivery is one input record as the pipeline saw it.
type Delivery struct {
	message.Coordinates

	Outcome    string    `json:"outcome"`
	Reason     string    `json:"reason,omitempty"`
	Error      string    `json:"error,omitempty"`
	At         time.Time `json:"at"`
	IdentityID int64     `json:"identity_id,omitempty"`
	CaseID     int64     `json:"case_id,omitempty"`
}

// CaseResolution is who resolved a case, when, why, and what it settled.
type CaseResolution struct {
	Decision     string    `json:"decision"`
	Amount       string    `json:"amount,omitempty"`
	Reason       string    `json:"reason"`
	By           string    `json:"by"`
	At           time.Time `json:"at"`
	IdentityID   int64     `json:"identity_id,omitempty"`
	SettlementID string    `json:"settlement_id,omitempty"`
}

// Case returns one case in full, or settle.ErrCaseNotFound.
func (s *Store) Case(ctx context.Context, id int64) (*Case, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, dberr.Wrap(fmt.Sprintf("read case %d", id), err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	c, err := readCase(ctx, db.On(tx), id)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func readCase(ctx context.Context, q *db.Queries, id int64) (*Case, error) {
	what := fmt.Sprintf("read case %d", id)
	row, err := q.ConflictCaseGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("case %d: %w", id, settle.ErrCaseNotFound)
	}
	if err != nil {
		return nil, dberr.Wrap(what, err)
	}
	c := &Case{CaseSummary: CaseSummary{ID: row.ID, TenantID: row.TenantID, AccountPeriod: row.AccountPeriod, RecordID: row.RecordID,
		Operation: row.Operation, Reason: row.Reason, Status: row.Status, OpenedAt: row.OpenedAt, ClosedAt: row.ClosedAt, Detail: row.Detail},
		IdentityID: row.IdentityID}
	stored, incoming := row.StoredCanonical, row.IncomingCanonical
	src := message.Coordinates{Topic: row.Topic, Partition: row.Partition, Offset: row.Offset}
	c.IncomingFingerprint = fmt.Sprintf("%016x", uint64(row.IncomingFingerprint))
	c.Stored, c.Incoming = json.RawMessage("null"), json.RawMessage(incoming)
	if stored != nil {
		c.Stored = json.RawMessage(stored)
	}
	if c.Fields, err = sideBySide(stored, incoming); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	c.Differing = []string{}
	for _, f := range c.Fields {
		if f.Differs {
			c.Differing = append(c.Differing, f.Field)
		}
	}
	in, _ := fingerprint.CanonicalFields(incoming)
	st, _ := fingerprint.CanonicalFields(stored)
	c.Subject, c.Currency, c.IncomingAmount, c.StoredAmount = in["subject"], in["currency"], in["amount"], st["amount"]
	if c.Chain, err = readCaseChain(ctx, q, c, in); err != nil {
		return nil, dberr.Wrap(what, err)
	}

	if c.Deliveries, err = deliveries(q.DeliveryByCase(ctx, id)); err != nil {
		return nil, dberr.Wrap(what, err)
	}
	if len(c.Deliveries) == 0 {
		// A case opened by a waiting operation's timeout has no delivery
		// row naming it; its coordinates are the case's own.
		c.Deliveries = []Delivery{{Coordinates: src, Outcome: string(message.OutcomeQuarantined), Reason: c.Reason, At: c.OpenedAt, CaseID: id}}
	}
	r, err := q.CaseResolutionGet(ctx, id)
	switch {
	case err == nil:
		c.Resolution = &CaseResolution{Decision: r.Decision, Amount: r.Amount, Reason: r.Reason, By: r.ResolvedBy, At: r.ResolvedAt,
			IdentityID: r.IdentityID, SettlementID: r.SettlementID}
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, dberr.Wrap(what, err)
	}
	return c, nil
}

// readCaseChain reads the chain a case is about: the stored record's for a
// fingerprint mismatch, else the one its incoming correction names.
func readCaseChain(ctx context.Context, q *db.Queries, c *Case, incoming map[string]string) (*CaseChain, error) {
	period, record := c.AccountPeriod, c.RecordID
	if c.Reason != message.ReasonFingerprintMismatch {
		if incoming["corrects"] == "" {
			return nil, nil
		}
		record = incoming["corrects"]
		if p := incoming["corrects_period"]; p != "" {
			period = p
		}
	}
	ch, err := q.CaseChain(ctx, db.CaseChainParams{TenantID: c.TenantID, AccountPeriod: period, RecordID: record})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the case's chain: %w", err)
	}
	return &CaseChain{NetCharge: ch.NetCharge, Currency: ch.Currency, Version: ch.Version, Refunded: ch.Refunded,
		RootSettlement: ch.RootSettlementID}, nil
}

// deliveryRow is the row of every query that reads deliveries: one column
// list, so one mapping.
type deliveryRow interface {
	db.DeliveryByCaseRow | db.DeliveryByIdentityRow | db.DeliveryGetRow
}

// deliveries maps the rows of a delivery query, or passes on its error.
func deliveries[R deliveryRow](rows []R, err error) ([]Delivery, error) {
	if err != nil {
		return nil, err
	}
	out := make([]Delivery, 0, len(rows))
	for _, r := range rows {
		d := db.DeliveryGetRow(r)
		out = append(out, Delivery{Coordinates: message.Coordinates{Topic: d.Topic, Partition: d.Partition, Offset: d.Offset},
			Outcome: d.Outcome, Reason: d.Reason, Error: d.Error, At: d.At, IdentityID: d.IdentityID, CaseID: d.CaseID})
	}
	return out, nil
}

// sideBySide lists every field of either canonical form, sorted, marking
// the ones that differ. A rule-based case has no stored form: its fields
// are the incoming ones and none differ.
func sideBySide(stored, incoming []byte) ([]CaseField, error) {
	in, err := fingerprint.CanonicalFields(incoming)
	if err != nil {
		return nil, fmt.Errorf("incoming payload: %w", err)
	}
	var st map[string]string
	if stored != nil {
		if st, err = fingerprint.CanonicalFields(stored); err != nil {
			return nil, fmt.Errorf("stored payload: %w", err)
		}
	}
	names := make([]string, 0, len(in)+len(st))
	for k := range in {
		names = append(names, k)
	}
	for k := range st {
		if _, ok := in[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	out := make([]CaseField, 0, len(names))
	for _, k := range names {
		sv, sok := st[k]
		iv, iok := in[k]
		out = append(out, CaseField{Field: k, Stored: sv, Incoming: iv, StoredPresent: sok, IncomingPresent: iok,
			Differs: stored != nil && (sok != iok || sv != iv)})
	}
	return out, nil
}

// CasesByRecord returns every case of one record_id, all operations.
func (s *Store) CasesByRecord(ctx context.Context, tenant, period, recordID string) ([]*Case, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, dberr.Wrap("read cases", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	return casesByRecord(ctx, db.On(tx), tenant, period, recordID)
}

func casesByRecord(ctx context.Context, q *db.Queries, tenant, period, recordID string) ([]*Case, error) {
	ids, err := q.ConflictCaseByRecord(ctx, db.ConflictCaseByRecordParams{TenantID: tenant, AccountPeriod: period, RecordID: recordID})
	if err != nil {
		return nil, dberr.Wrap("read cases", err)
	}
	out := []*Case{}
	for _, id := range ids {
		c, err := readCase(ctx, q, id)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
