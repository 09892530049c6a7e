package inspect

// The analysts' search and the views the page links between: one box that
// takes a record_id, a subject, a settlement id or a case id; an account's
// settlement sequence; what a case links to; resolutions for the export;
// open cases by age. Nothing here writes.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// Limits of the search.
const (
	// SearchHitsMax caps the hits of each kind one search returns.
	SearchHitsMax = 50
	// SearchTextMax caps a search term: record ids, subjects and
	// settlement ids are shorter.
	SearchTextMax = 512
	// AccountSettlementsMax caps the settlements listed for one account.
	AccountSettlementsMax = 1000
)

// Kinds of search hits.
const (
	HitCase       = "case"       // a conflict case, by its id or its record_id
	HitRecord     = "record"     // an operation of a record_id
	HitSettlement = "settlement" // the operation that a settlement id names
	HitAccount    = "account"    // an account of a subject
)

// SearchQuery is what the analyst typed: one term, optionally narrowed to a
// tenant and a period.
type SearchQuery struct {
	Text   string // a record_id, subject, settlement id, or case id ("123" or "#123")
	Tenant string // "" = any
	Period string // "" = any
}

// SearchHit is one thing the term names.
type SearchHit struct {
	Kind          string `json:"kind"`
	TenantID      string `json:"tenant_id"`
	AccountPeriod string `json:"account_period,omitempty"`
	RecordID      string `json:"record_id,omitempty"`
	Operation     string `json:"operation,omitempty"`
	Outcome       string `json:"outcome,omitempty"` // of a record or settlement
	SettlementID  string `json:"settlement_id,omitempty"`
	Subject       string `json:"subject,omitempty"`
	Currency      string `json:"currency,omitempty"`
	Balance       string `json:"balance,omitempty"` // of an account
	CaseID        int64  `json:"case_id,omitempty"`
	Reason        string `json:"reason,omitempty"` // of a case
	Status        string `json:"status,omitempty"` // of a case
}

// Search finds what q.Text names, every kind at once: cases (by id or
// record_id), operations (by record_id or settlement id) and accounts (by
// subject). Hits come cases first, then settlements, records and accounts.
func (s *Store) Search(ctx context.Context, q SearchQuery) ([]SearchHit, error) {
	text := strings.TrimSpace(q.Text)
	switch {
	case text == "":
		return nil, fmt.Errorf("%w: search: an empty term", ErrBadFilter)
	case len(text) > SearchTextMax || len(q.Tenant) > caseFilterTextMax || len(q.Period) > caseFilterTextMax:
		return nil, fmt.Errorf("%w: search: term, tenant or period too long", ErrBadFilter)
	}
	var caseID int64
	if n, err := strconv.ParseInt(strings.TrimPrefix(text, "#"), 10, 64); err == nil && n > 0 {
		caseID = n
	}
	what := fmt.Sprintf("search %q", text)
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, dberr.Wrap(what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// Every query planned with the values, so the "any tenant" branches
	// fold away and the scope key is used when a tenant is given.
	pq := db.On(pgq.Planned(tx))
	cases, err := searchCases(ctx, pq, q, text, caseID)
	if err != nil {
		return nil, dberr.Wrap(what, err)
	}
	settlements, records, err := searchIdentities(ctx, pq, q, text)
	if err != nil {
		return nil, dberr.Wrap(what, err)
	}
	accounts, err := searchAccounts(ctx, pq, q, text)
	if err != nil {
		return nil, dberr.Wrap(what, err)
	}
	hits := append(append(append([]SearchHit{}, cases...), settlements...), records...)
	return append(hits, accounts...), nil
}

// searchCases finds the conflict cases whose record or number is text.
func searchCases(ctx context.Context, pq *db.Queries, q SearchQuery, text string, caseID int64) ([]SearchHit, error) {
	rows, err := pq.ConflictCaseSearch(ctx, db.ConflictCaseSearchParams{Tenant: q.Tenant, Period: q.Period, RecordID: text,
		CaseID: caseID, HitsMax: SearchHitsMax})
	if err != nil {
		return nil, err
	}
	hits := make([]SearchHit, 0, len(rows))
	for _, r := range rows {
		hits = append(hits, SearchHit{Kind: HitCase, CaseID: r.ID, TenantID: r.TenantID, AccountPeriod: r.AccountPeriod,
			RecordID: r.RecordID, Operation: r.Operation, Reason: r.Reason, Status: r.Status})
	}
	return hits, nil
}

// searchIdentities finds the settlements and the records text names.
func searchIdentities(ctx context.Context, pq *db.Queries, q SearchQuery, text string) (settlements, records []SearchHit, err error) {
	rows, err := pq.IdentitySearch(ctx, db.IdentitySearchParams{Tenant: q.Tenant, Period: q.Period, Term: text, HitsMax: SearchHitsMax})
	if err != nil {
		return nil, nil, err
	}
	seen := map[[3]string]bool{}
	for _, r := range rows {
		h := SearchHit{TenantID: r.TenantID, AccountPeriod: r.AccountPeriod, RecordID: r.RecordID, Operation: r.Operation,
			Outcome: r.Outcome, SettlementID: r.SettlementID, Subject: r.Subject, Currency: r.Currency}
		if r.BySettlement {
			h.Kind = HitSettlement
			settlements = append(settlements, h)
			continue
		}
		// A record is one hit however many operations it has.
		k := [3]string{h.TenantID, h.AccountPeriod, h.RecordID}
		if !seen[k] {
			seen[k] = true
			h.Kind = HitRecord
			records = append(records, h)
		}
	}
	return settlements, records, nil
}

// searchAccounts finds the accounts whose subject text names.
func searchAccounts(ctx context.Context, pq *db.Queries, q SearchQuery, text string) ([]SearchHit, error) {
	rows, err := pq.AccountSearch(ctx, db.AccountSearchParams{Tenant: q.Tenant, Subject: text, HitsMax: SearchHitsMax})
	if err != nil {
		return nil, err
	}
	hits := make([]SearchHit, 0, len(rows))
	for _, r := range rows {
		hits = append(hits, SearchHit{Kind: HitAccount, TenantID: r.TenantID, Subject: r.Subject, Currency: r.Currency, Balance: r.Balance})
	}
	return hits, nil
}

// AccountSettlement is one settlement in an account's sequence.
type AccountSettlement struct {
	Sequence      int64     `json:"sequence"`
	SettlementID  string    `json:"settlement_id"`
	AccountPeriod string    `json:"account_period"`
	RecordID      string    `json:"record_id"`
	Operation     string    `json:"operation"`
	BalanceAfter  string    `json:"balance_after,omitempty"`
	HeldAfter     string    `json:"held_after,omitempty"`
	CommittedAt   time.Time `json:"committed_at"`
}

// AccountSettlements returns the newest limit settlements that wrote rows to
// one account, newest first: its gapless per-account sequence with the
// balance after each (limit 0 = 100, at most AccountSettlementsMax).
func (s *Store) AccountSettlements(ctx context.Context, tenant, subject, currency string, limit int) ([]AccountSettlement, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 0 || limit > AccountSettlementsMax {
		return nil, fmt.Errorf("%w: limit %d: want 1 to %d", ErrBadFilter, limit, AccountSettlementsMax)
	}
	what := fmt.Sprintf("settlements of account tenant=%s subject=%s currency=%s", tenant, subject, currency)
	rows, err := db.On(s.pool).AccountSettlements(ctx, db.AccountSettlementsParams{TenantID: tenant, Subject: subject,
		Currency: currency, SettlementsMax: int32(limit)})
	if err != nil {
		return nil, dberr.Wrap(what, err)
	}
	out := make([]AccountSettlement, 0, len(rows))
	for _, r := range rows {
		out = append(out, AccountSettlement{Sequence: r.Sequence, SettlementID: r.SettlementID, AccountPeriod: r.AccountPeriod,
			RecordID: r.RecordID, Operation: r.Operation, BalanceAfter: r.BalanceAfter, HeldAfter: r.HeldAfter, CommittedAt: r.CommittedAt})
	}
	return out, nil
}

// CaseLinks is what a case page links to beyond the case itself.
type CaseLinks struct {
	// Stored is the identity the incoming record conflicted with; nil for a
	// rule-based case (an orphan, an invalid link), which has none.
	Stored *StoredIdentity `json:"stored,omitempty"`
	// Adjustment is the identity an accepted resolution settled; nil
	// otherwise.
	Adjustment *IdentityRef `json:"adjustment,omitempty"`
}

// StoredIdentity is the stored side of a conflict: its fingerprint and the
// delivery that first brought it.
type StoredIdentity struct {
	IdentityRef
	Fingerprint   string              `json:"fingerprint"` // xxhash, hex
	FirstDelivery message.Coordinates `json:"first_delivery"`
}

// CaseLinks returns what case id links to, or settle.ErrCaseNotFound.
func (s *Store) CaseLinks(ctx context.Context, id int64) (*CaseLinks, error) {
	r, err := db.On(s.pool).ConflictCaseLinks(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("case %d: %w", id, settle.ErrCaseNotFound)
	}
	if err != nil {
		return nil, dberr.Wrap(fmt.Sprintf("read links of case %d", id), err)
	}
	l := &CaseLinks{}
	if r.HasStored {
		l.Stored = &StoredIdentity{
			IdentityRef: IdentityRef{AccountPeriod: r.AccountPeriod, RecordID: r.RecordID, Operation: r.Operation, Outcome: r.Outcome,
				SettlementID: r.SettlementID},
			Fingerprint:   fmt.Sprintf("%016x", uint64(r.Fingerprint)),
			FirstDelivery: message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset},
		}
	}
	if r.AdjustmentRecordID != "" {
		l.Adjustment = &IdentityRef{AccountPeriod: r.AdjustmentPeriod, RecordID: r.AdjustmentRecordID, Operation: r.AdjustmentOperation}
	}
	return l, nil
}

// CaseResolutions returns the resolutions of the cases ids, by case id (a
// case without one is absent): the export's resolution columns.
func (s *Store) CaseResolutions(ctx context.Context, ids []int64) (map[int64]CaseResolution, error) {
	out := make(map[int64]CaseResolution, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := db.On(s.pool).CaseResolutionOfCases(ctx, ids)
	if err != nil {
		return nil, dberr.Wrap("read resolutions", err)
	}
	for _, r := range rows {
		out[r.CaseID] = CaseResolution{Decision: r.Decision, Amount: r.Amount, Reason: r.Reason, By: r.ResolvedBy, At: r.ResolvedAt,
			IdentityID: r.IdentityID, SettlementID: r.SettlementID}
	}
	return out, nil
}

// AgeBucket is the number of open cases whose age is at least From and,
// when To is not zero, less than To.
type AgeBucket struct {
	From        time.Duration `json:"-"`
	To          time.Duration `json:"-"`
	FromSeconds int64         `json:"from_seconds"`
	ToSeconds   int64         `json:"to_seconds,omitempty"` // absent: no upper bound
	Count       int64         `json:"count"`
}

// OpenCaseAges counts open cases by age at now: one bucket below the first
// bound, one between each pair of bounds, one from the last up. bounds must
// be positive and increasing. tenant "" counts every tenant's.
func (s *Store) OpenCaseAges(ctx context.Context, tenant string, now time.Time, bounds []time.Duration) ([]AgeBucket, error) {
	cut := make([]time.Time, len(bounds))
	for i, b := range bounds {
		if b <= 0 || (i > 0 && b <= bounds[i-1]) {
			return nil, fmt.Errorf("%w: age bounds %v: want positive and increasing", ErrBadFilter, bounds)
		}
		cut[i] = now.Add(-b)
	}
	out := make([]AgeBucket, len(bounds)+1)
	for i := range out {
		if i > 0 {
			out[i].From = bounds[i-1]
		}
		if i < len(bounds) {
			out[i].To = bounds[i]
		}
		out[i].FromSeconds, out[i].ToSeconds = int64(out[i].From/time.Second), int64(out[i].To/time.Second)
	}
	rows, err := db.On(s.pool).ConflictCaseOpenAges(ctx, db.ConflictCaseOpenAgesParams{Cutoffs: cut, Tenant: tenant})
	if err != nil {
		return nil, dberr.Wrap("count open cases by age", err)
	}
	for _, r := range rows {
		out[r.OlderThan].Count = r.Count // older than: how many bounds the case is past
	}
	return out, nil
}
