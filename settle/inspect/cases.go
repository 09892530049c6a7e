package inspect

// The analysts' read side of conflict cases: the queue, its facets and one
// case with both canonical payloads side by side. Resolving a case is
// Resolve (resolve.go); nothing here writes.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	sqlConflictCaseList  = mustQuery("conflict_case_list.sql")
	sqlConflictCaseCount = mustQuery("conflict_case_count.sql")
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
