package inspect

// The analysts' read side of conflict cases: the queue, its facets and one
// case with both canonical payloads side by side. Resolving a case is
// Resolve (resolve.go); nothing here writes.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/settlehq/settle/settle"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/record"
)

var (
	sqlConflictCaseList     = mustQuery("conflict_case_list.sql")
	sqlConflictCaseCount    = mustQuery("conflict_case_count.sql")
	sqlConflictCaseGet      = mustQuery("conflict_case_get.sql")
	sqlCaseChain            = mustQuery("case_chain.sql")
	sqlConflictCaseByRecord = mustQuery("conflict_case_by_record.sql")
	sqlDeliveryByCase       = mustQuery("delivery_by_case.sql")
	sqlCaseResolutionGet    = mustQuery("case_resolution_get.sql")
	sqlDeliveryTimeline     = mustQuery("delivery_timeline.sql")
)

// Limits of the case listing.
const (
	// CasePageRowsDefault is the page size when a filter asks for none.
	CasePageRowsDefault = 50
	// CasePageRowsMax caps one page: a page is read in one query and held in
	// memory.
	CasePageRowsMax = 1000
	// caseFilterTextMax caps a filter value (longer ones cannot match).
	caseFilterTextMax = 256
)

// Case statuses (conflict_cases_status_check).
const (
	CaseOpen         = "open"
	CaseAccepted     = "accepted"
	CaseRejected     = "rejected"
	CaseAutoResolved = "auto_resolved"
)

// CaseFilter selects cases for the queue. The zero value lists every case,
// newest first, CasePageRowsDefault to a page.
type CaseFilter struct {
	Tenant string // "" = any
	Period string // YYYY-MM; "" = any
	Reason string // fingerprint_mismatch, orphan, ...; "" = any
	Status string // open, accepted, rejected, auto_resolved; "" = any

	// OpenedBefore and OpenedAfter bound opened_at (inclusive); zero = no
	// bound. Callers turn "older than 2h" into OpenedBefore = now - 2h.
	OpenedBefore time.Time
	OpenedAfter  time.Time

	Limit int    // 0 = CasePageRowsDefault; at most CasePageRowsMax
	After string // the Next cursor of the previous page; "" = first page
}

// ErrBadFilter marks a filter value that cannot be used (a malformed cursor,
// status or limit): a caller's mistake, not a failure.
var ErrBadFilter = errors.New("bad filter")

// Validate reports a filter that cannot be used.
func (f CaseFilter) Validate() error {
	switch f.Status {
	case "", CaseOpen, CaseAccepted, CaseRejected, CaseAutoResolved:
	default:
		return fmt.Errorf("%w: status %q: want open, accepted, rejected or auto_resolved", ErrBadFilter, f.Status)
	}
	if f.Limit < 0 || f.Limit > CasePageRowsMax {
		return fmt.Errorf("%w: limit %d: want 1 to %d", ErrBadFilter, f.Limit, CasePageRowsMax)
	}
	for name, v := range map[string]string{"tenant": f.Tenant, "period": f.Period, "reason": f.Reason} {
		if len(v) > caseFilterTextMax {
			return fmt.Errorf("%w: %s longer than %d characters", ErrBadFilter, name, caseFilterTextMax)
		}
	}
	if _, _, err := decodeCaseCursor(f.After); err != nil {
		return err
	}
	return nil
}

// CaseSummary is one row of the queue.
type CaseSummary struct {
	ID             int64      `json:"id"`
	TenantID       string     `json:"tenant_id"`
	AccountPeriod  string     `json:"account_period"`
	RecordID       string     `json:"record_id"`
	Operation      string     `json:"operation"`
	Reason         string     `json:"reason"`
	Status         string     `json:"status"`
	OpenedAt       time.Time  `json:"opened_at"`
	ClosedAt       *time.Time `json:"closed_at,omitempty"`
	Detail         string     `json:"detail,omitempty"`
	Subject        string     `json:"subject,omitempty"`         // from the incoming payload
	Currency       string     `json:"currency,omitempty"`        // from the incoming payload
	IncomingAmount string     `json:"incoming_amount,omitempty"` // from the incoming payload
	StoredAmount   string     `json:"stored_amount,omitempty"`   // from the stored payload, when there is one
}

// CasePage is one page of the queue. Next, when not empty, is the After of
// the following page.
type CasePage struct {
	Cases []CaseSummary `json:"cases"`
	Next  string        `json:"next,omitempty"`
}

// ListCases returns one page of cases matching f, newest first.
func (s *Store) ListCases(ctx context.Context, f CaseFilter) (*CasePage, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit == 0 {
		limit = CasePageRowsDefault
	}
	// QueryExecModeExec: an unnamed statement planned with the values, so
	// the unused filters fold away and the queue index is chosen (a cached
	// generic plan could not know which filters are empty).
	rows, err := s.pool.Query(ctx, sqlConflictCaseList, caseListArgs(f, limit+1)...)
	if err != nil {
		return nil, wrapStoreErr("list cases", err)
	}
	defer rows.Close()
	page := &CasePage{Cases: []CaseSummary{}}
	for rows.Next() {
		var c CaseSummary
		if err := rows.Scan(&c.ID, &c.TenantID, &c.AccountPeriod, &c.RecordID, &c.Operation, &c.Reason, &c.Status,
			&c.OpenedAt, &c.ClosedAt, &c.Detail, &c.Subject, &c.IncomingAmount, &c.StoredAmount, &c.Currency); err != nil {
			return nil, wrapStoreErr("list cases", err)
		}
		page.Cases = append(page.Cases, c)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapStoreErr("list cases", err)
	}
	if len(page.Cases) > limit {
		page.Cases = page.Cases[:limit]
		last := page.Cases[limit-1]
		page.Next = encodeCaseCursor(last.OpenedAt, last.ID)
	}
	return page, nil
}

// caseListArgs are the arguments of conflict_case_list.sql, led by the
// exec mode that makes pgx plan them as values.
func caseListArgs(f CaseFilter, limit int) []any {
	var before, after, curAt *time.Time
	if !f.OpenedBefore.IsZero() {
		before = &f.OpenedBefore
	}
	if !f.OpenedAfter.IsZero() {
		after = &f.OpenedAfter
	}
	at, id, _ := decodeCaseCursor(f.After)
	if f.After != "" {
		curAt = &at
	}
	return []any{pgx.QueryExecModeExec, f.Status, f.Tenant, f.Reason, f.Period, before, after, curAt, id, limit}
}

// caseListPlan is EXPLAIN of the listing for f: what the plan test reads.
func (s *Store) caseListPlan(ctx context.Context, f CaseFilter) (string, error) {
	limit := f.Limit
	if limit == 0 {
		limit = CasePageRowsDefault
	}
	rows, err := s.pool.Query(ctx, "EXPLAIN "+sqlConflictCaseList, caseListArgs(f, limit+1)...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		b.WriteString(line + "\n")
	}
	return b.String(), rows.Err()
}

// The cursor is opaque to callers: base64 of "unixmicro.id". Microseconds
// are PostgreSQL's timestamp precision, so the round trip is exact.
func encodeCaseCursor(at time.Time, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMicro(), 10) + "." + strconv.FormatInt(id, 10)))
}

func decodeCaseCursor(c string) (time.Time, int64, error) {
	if c == "" {
		return time.Time{}, 0, nil
	}
	bad := fmt.Errorf("%w: cursor %q: use the next value of a previous page", ErrBadFilter, c)
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, 0, bad
	}
	at, id, ok := strings.Cut(string(b), ".")
	if !ok {
		return time.Time{}, 0, bad
	}
	us, err1 := strconv.ParseInt(at, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, 0, bad
	}
	return time.UnixMicro(us), n, nil
}

// CaseCount is the number of cases with one reason and status.
type CaseCount struct {
	Reason string `json:"reason"`
	Status string `json:"status"`
	Count  int64  `json:"count"`
}

// CountCases counts cases by reason and status for one tenant and period
// ("" = any): the queue's facets and the overview's open cases by reason.
func (s *Store) CountCases(ctx context.Context, tenant, period string) ([]CaseCount, error) {
	rows, err := s.pool.Query(ctx, sqlConflictCaseCount, pgx.QueryExecModeExec, tenant, period)
	if err != nil {
		return nil, wrapStoreErr("count cases", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (CaseCount, error) {
		var c CaseCount
		err := r.Scan(&c.Reason, &c.Status, &c.Count)
		return c, err
	})
	if err != nil {
		return nil, wrapStoreErr("count cases", err)
	}
	if out == nil {
		out = []CaseCount{}
	}
	return out, nil
}

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

// OutcomeBucket is the number of deliveries with one outcome in one hour.
type OutcomeBucket struct {
	Hour    time.Time `json:"hour"`
	Outcome string    `json:"outcome"`
	Count   int64     `json:"count"`
}

// OutcomeTimeline counts deliveries per hour and outcome since since: the
// overview's outcomes over time.
func (s *Store) OutcomeTimeline(ctx context.Context, since time.Time) ([]OutcomeBucket, error) {
	rows, err := s.pool.Query(ctx, sqlDeliveryTimeline, since)
	if err != nil {
		return nil, wrapStoreErr("count deliveries per hour", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (OutcomeBucket, error) {
		var b OutcomeBucket
		err := r.Scan(&b.Hour, &b.Outcome, &b.Count)
		return b, err
	})
	if err != nil {
		return nil, wrapStoreErr("count deliveries per hour", err)
	}
	if out == nil {
		out = []OutcomeBucket{}
	}
	return out, nil
}
