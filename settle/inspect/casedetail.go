package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle"
)

var (
	sqlConflictCaseGet      = mustQuery("conflict_case_get.sql")
	sqlCaseChain            = mustQuery("case_chain.sql")
	sqlConflictCaseByRecord = mustQuery("conflict_case_by_record.sql")
	sqlDeliveryByCase       = mustQuery("delivery_by_case.sql")
	sqlCaseResolutionGet    = mustQuery("case_resolution_get.sql")
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
	settle.Coordinates
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
		return nil, wrapStoreErr(fmt.Sprintf("read case %d", id), err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	c, err := readCase(ctx, tx, id)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// querier is what the read side needs of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func readCase(ctx context.Context, q querier, id int64) (*Case, error) {
	what := fmt.Sprintf("read case %d", id)
	c := &Case{}
	var (
		fp               int64
		stored, incoming []byte
		src              settle.Coordinates
	)
	err := q.QueryRow(ctx, sqlConflictCaseGet, id).Scan(&c.ID, &c.TenantID, &c.AccountPeriod, &c.RecordID, &c.Operation,
		&c.Reason, &c.Status, &c.OpenedAt, &c.ClosedAt, &c.Detail, &fp, &c.IdentityID, &stored, &incoming,
		&src.Topic, &src.Partition, &src.Offset)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("case %d: %w", id, settle.ErrCaseNotFound)
	}
	if err != nil {
		return nil, wrapStoreErr(what, err)
	}
	c.IncomingFingerprint = fmt.Sprintf("%016x", uint64(fp))
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
	in, _ := record.CanonicalFields(incoming)
	st, _ := record.CanonicalFields(stored)
	c.Subject, c.Currency, c.IncomingAmount, c.StoredAmount = in["subject"], in["currency"], in["amount"], st["amount"]
	if c.Chain, err = readCaseChain(ctx, q, c, in); err != nil {
		return nil, wrapStoreErr(what, err)
	}

	if c.Deliveries, err = readDeliveries(ctx, q, sqlDeliveryByCase, id); err != nil {
		return nil, wrapStoreErr(what, err)
	}
	if len(c.Deliveries) == 0 {
		// A case opened by a waiting operation's timeout has no delivery
		// row naming it; its coordinates are the case's own.
		c.Deliveries = []Delivery{{Coordinates: src, Outcome: string(settle.OutcomeQuarantined), Reason: c.Reason, At: c.OpenedAt, CaseID: id}}
	}
	var r CaseResolution
	err = q.QueryRow(ctx, sqlCaseResolutionGet, id).Scan(&r.Decision, &r.Amount, &r.Reason, &r.By, &r.At, &r.IdentityID, &r.SettlementID)
	switch {
	case err == nil:
		c.Resolution = &r
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, wrapStoreErr(what, err)
	}
	return c, nil
}

// readCaseChain reads the chain a case is about: the stored record's for a
// fingerprint mismatch, else the one its incoming correction names.
func readCaseChain(ctx context.Context, q querier, c *Case, incoming map[string]string) (*CaseChain, error) {
	period, record := c.AccountPeriod, c.RecordID
	if c.Reason != settle.ReasonFingerprintMismatch {
		if incoming["corrects"] == "" {
			return nil, nil
		}
		record = incoming["corrects"]
		if p := incoming["corrects_period"]; p != "" {
			period = p
		}
	}
	var ch CaseChain
	err := q.QueryRow(ctx, sqlCaseChain, c.TenantID, period, record).Scan(&ch.NetCharge, &ch.Version, &ch.Refunded, &ch.RootSettlement, &ch.Currency)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the case's chain: %w", err)
	}
	return &ch, nil
}

func readDeliveries(ctx context.Context, q querier, sql string, args ...any) ([]Delivery, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		err := r.Scan(&d.Topic, &d.Partition, &d.Offset, &d.Outcome, &d.Reason, &d.Error, &d.At, &d.IdentityID, &d.CaseID)
		return d, err
	})
	if out == nil {
		out = []Delivery{}
	}
	return out, err
}

// sideBySide lists every field of either canonical form, sorted, marking
// the ones that differ. A rule-based case has no stored form: its fields
// are the incoming ones and none differ.
func sideBySide(stored, incoming []byte) ([]CaseField, error) {
	in, err := record.CanonicalFields(incoming)
	if err != nil {
		return nil, fmt.Errorf("incoming payload: %w", err)
	}
	var st map[string]string
	if stored != nil {
		if st, err = record.CanonicalFields(stored); err != nil {
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
		return nil, wrapStoreErr("read cases", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	return casesByRecord(ctx, tx, tenant, period, recordID)
}

func casesByRecord(ctx context.Context, q querier, tenant, period, recordID string) ([]*Case, error) {
	rows, err := q.Query(ctx, sqlConflictCaseByRecord, tenant, period, recordID)
	if err != nil {
		return nil, wrapStoreErr("read cases", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, wrapStoreErr("read cases", err)
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
