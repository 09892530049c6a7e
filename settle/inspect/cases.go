package inspect

// The analysts' read side of conflict cases: the queue, its facets and one
// case with both canonical payloads side by side. Resolving a case is
// Resolve (resolve.go); nothing here writes.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
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

// CaseReasons are the reasons a conflict case is opened for.
var CaseReasons = []string{message.ReasonFingerprintMismatch, message.ReasonOrphan, message.ReasonInvalidLink,
	message.ReasonTargetRefunded, message.ReasonVersionConflict}

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
	if f.Reason != "" && !slices.Contains(CaseReasons, f.Reason) {
		return fmt.Errorf("%w: reason %q: want one of %s", ErrBadFilter, f.Reason, strings.Join(CaseReasons, ", "))
	}
	if f.Period != "" && !validPeriod(f.Period) {
		return fmt.Errorf("%w: period %q: want YYYY-MM", ErrBadFilter, f.Period)
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
	// Differs names the fields whose values differ between the stored and
	// the incoming record, in order (none without a stored record).
	Differs []string `json:"differs,omitempty"`
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
	rows, err := caseList(ctx, s.pool, f, limit+1)
	if err != nil {
		return nil, dberr.Wrap("list cases", err)
	}
	page := &CasePage{Cases: make([]CaseSummary, 0, len(rows))}
	for _, r := range rows {
		page.Cases = append(page.Cases, CaseSummary{ID: r.ID, TenantID: r.TenantID, AccountPeriod: r.AccountPeriod, RecordID: r.RecordID,
			Operation: r.Operation, Reason: r.Reason, Status: r.Status, OpenedAt: r.OpenedAt, ClosedAt: r.ClosedAt, Detail: r.Detail,
			Subject: r.Subject, Currency: r.Currency, IncomingAmount: r.IncomingAmount, StoredAmount: r.StoredAmount, Differs: strings.Fields(r.Differs)})
	}
	if len(page.Cases) > limit {
		page.Cases = page.Cases[:limit]
		last := page.Cases[limit-1]
		page.Next = encodeCaseCursor(last.OpenedAt, last.ID)
	}
	return page, nil
}

// CountCasesUpTo counts the cases f selects (its cursor and limit aside),
// no further than rowsMax: what an export checks against its cap before
// its first byte.
func (s *Store) CountCasesUpTo(ctx context.Context, f CaseFilter, rowsMax int) (int64, error) {
	f.After, f.Limit = "", 0
	if err := f.Validate(); err != nil {
		return 0, err
	}
	p := caseListParams(f, 0)
	n, err := db.On(pgq.Planned(s.pool)).ConflictCaseListCount(ctx, db.ConflictCaseListCountParams{Status: p.Status, Tenant: p.Tenant,
		Reason: p.Reason, Period: p.Period, OpenedBefore: p.OpenedBefore, OpenedAfter: p.OpenedAfter, RowsMax: int64(rowsMax)})
	if err != nil {
		return 0, dberr.Wrap("count cases", err)
	}
	return n, nil
}

// caseList runs the listing for f and a page of limit rows on conn,
// planned with its values, so the unused filters fold away and the queue
// index is chosen.
func caseList(ctx context.Context, conn db.DBTX, f CaseFilter, limit int) ([]db.ConflictCaseListRow, error) {
	return db.On(pgq.Planned(conn)).ConflictCaseList(ctx, caseListParams(f, limit))
}

// caseListParams are the parameters of conflict_case_list.sql for f and
// a page of limit rows.
func caseListParams(f CaseFilter, limit int) db.ConflictCaseListParams {
	p := db.ConflictCaseListParams{Status: f.Status, Tenant: f.Tenant, Reason: f.Reason, Period: f.Period, PageRows: int64(limit)}
	if !f.OpenedBefore.IsZero() {
		p.OpenedBefore = &f.OpenedBefore
	}
	if !f.OpenedAfter.IsZero() {
		p.OpenedAfter = &f.OpenedAfter
	}
	at, id, _ := decodeCaseCursor(f.After)
	if f.After != "" {
		p.AfterOpenedAt = &at
	}
	p.AfterID = id
	return p
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
	rows, err := db.On(pgq.Planned(s.pool)).ConflictCaseCount(ctx, db.ConflictCaseCountParams{Tenant: tenant, Period: period})
	if err != nil {
		return nil, dberr.Wrap("count cases", err)
	}
	out := make([]CaseCount, 0, len(rows))
	for _, r := range rows {
		out = append(out, CaseCount{Reason: r.Reason, Status: r.Status, Count: r.Count})
	}
	return out, nil
}
