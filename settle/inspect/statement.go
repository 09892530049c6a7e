package inspect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/internal/db"
)

// StatementRowsMax caps the ledger rows one statement lists with its lines
// (StatementInput.Rows): they are held in memory.
const StatementRowsMax = 200_000

// Statement line categories: what a group of ledger rows is for.
const (
	LineCharge       = "charge"        // usage, balance bucket
	LineCorrection   = "correction"    // a correction: the chain's new total
	LineReversal     = "reversal"      // a correction to zero
	LineResolution   = "resolution"    // an analyst's accepted case
	LineRefund       = "refund"        // a chain's net charge returned
	LineReclaim      = "reclaim"       // a refund taken back
	LineGrant        = "grant"         // credits added
	LineHoldPlaced   = "hold_placed"   // reserved (held bucket)
	LineHoldCaptured = "hold_captured" // taken by the usage that captured it: up to its charge
	// LineHoldCaptureReleased is what a capture released: the hold's
	// remainder beyond the usage's charge.
	LineHoldCaptureReleased = "hold_released_at_capture"
	LineHoldReleased        = "hold_released" // released by a hold_release
	LineHoldExpired         = "hold_expired"  // released by expiry
)

// lineCategory names what an operation's rows in a bucket are; part splits
// a capture's held row (statement_lines.sql).
func lineCategory(operation, bucket, part string) string {
	switch {
	case operation == "usage" && bucket == "balance":
		return LineCharge
	case operation == "usage" && part == "released":
		return LineHoldCaptureReleased
	case operation == "usage":
		return LineHoldCaptured
	case operation == "correction":
		return LineCorrection
	case operation == "reversal":
		return LineReversal
	case operation == string(settle.OperationResolution):
		return LineResolution
	case operation == "refund":
		return LineRefund
	case operation == "reclaim":
		return LineReclaim
	case operation == "grant":
		return LineGrant
	case operation == "hold":
		return LineHoldPlaced
	case operation == "hold_release":
		return LineHoldReleased
	case operation == "expire":
		return LineHoldExpired
	}
	return operation
}

// lineOrder is the order a controller reads an account's lines in, top to
// bottom, between the opening and the closing: charges (by meter),
// corrections, reversals, analysts' resolutions, refunds, reclaims,
// grants, then holds placed, captured, released at capture, released and
// expired. The period's on-time lines come first, the late ones after.
var lineOrder = map[string]int{
	LineCharge: 0, LineCorrection: 1, LineReversal: 2, LineResolution: 3, LineRefund: 4, LineReclaim: 5, LineGrant: 6,
	LineHoldPlaced: 7, LineHoldCaptured: 8, LineHoldCaptureReleased: 9, LineHoldReleased: 10, LineHoldExpired: 11,
}

// sortLines puts an account's lines in lineOrder.
func sortLines(ls []StatementLine) {
	sort.SliceStable(ls, func(i, j int) bool {
		a, b := ls[i], ls[j]
		if a.Late != b.Late {
			return !a.Late
		}
		if lineOrder[a.Category] != lineOrder[b.Category] {
			return lineOrder[a.Category] < lineOrder[b.Category]
		}
		return a.Meter < b.Meter
	})
}

// RowSpan says which ledger rows are behind a line without listing them:
// their id range when they are every row in it ("12-18"), else how many
// lie within it, so that a range never hides gaps (StatementInput.Rows
// lists them).
func (l StatementLine) RowSpan() string {
	switch {
	case l.FirstRowID == l.LastRowID:
		return fmt.Sprintf("row %d", l.FirstRowID)
	case l.LastRowID-l.FirstRowID+1 == l.Rows:
		return fmt.Sprintf("rows %d-%d", l.FirstRowID, l.LastRowID)
	}
	return fmt.Sprintf("%d rows among ids %d to %d", l.Rows, l.FirstRowID, l.LastRowID)
}

// StatementInput names a statement: a tenant's period, for one subject or
// all of them.
type StatementInput struct {
	TenantID string
	Period   string // YYYY-MM
	Subject  string // "" = every account of the tenant
	// Rows lists every ledger row of the period under its line (at most
	// StatementRowsMax).
	Rows bool

	rowsMax int // 0 = StatementRowsMax; tests lower it
}

// Statement is what each account of a tenant owes or holds for one period:
// every figure is a sum of ledger rows, and the rows add up to the ledger
// (see StatementAccount.Ties).
type Statement struct {
	TenantID string             `json:"tenant_id"`
	Period   string             `json:"account_period"`
	ClosedAt *time.Time         `json:"closed_at,omitempty"` // the period's close; later records are late
	ClosedBy string             `json:"closed_by,omitempty"`
	Accounts []StatementAccount `json:"accounts"`
}

// Ties reports whether every account's statement adds up to its ledger.
func (s *Statement) Ties() bool {
	for _, a := range s.Accounts {
		if !a.Ties {
			return false
		}
	}
	return true
}

// StatementAccount is one account's statement for the period. A period is
// the records' account_period: Opening sums the rows of earlier periods,
// Lines the period's rows, Later the rows of later periods; Opening + Lines
// = Closing and Closing + Later = the account's balance (Balance, Held,
// what settle balance shows).
type StatementAccount struct {
	Subject        string          `json:"subject"`
	Currency       string          `json:"currency"`
	OpeningBalance string          `json:"opening_balance"`
	OpeningHeld    string          `json:"opening_held"`
	Lines          []StatementLine `json:"lines"` // on-time lines first, then the late ones
	ClosingBalance string          `json:"closing_balance"`
	ClosingHeld    string          `json:"closing_held"`
	LaterBalance   string          `json:"later_periods_balance"`
	LaterHeld      string          `json:"later_periods_held"`
	Balance        string          `json:"balance"`
	Held           string          `json:"held"`
	// Settlements of the period on this account and the range of the
	// account's sequence they hold (other periods' late records may fall
	// inside it).
	Settlements   int64 `json:"settlements"`
	FirstSequence int64 `json:"first_sequence,omitempty"`
	LastSequence  int64 `json:"last_sequence,omitempty"`
	// Ties is Closing + Later = Balance and Held, and no row of the
	// account lacks its identity; Mismatch says what does not add up.
	Ties     bool   `json:"ties"`
	Mismatch string `json:"mismatch,omitempty"`
}

// StatementLine is one sum of the period's ledger rows of an account.
type StatementLine struct {
	Category      string         `json:"category"`
	Operation     string         `json:"operation"`
	Bucket        string         `json:"bucket"` // balance or held
	Meter         string         `json:"meter,omitempty"`
	Late          bool           `json:"late"` // settled after the period closed
	Amount        string         `json:"amount"`
	Rows          int64          `json:"rows"`
	Settlements   int64          `json:"settlements"`
	FirstRowID    int64          `json:"first_row_id"`
	LastRowID     int64          `json:"last_row_id"`
	FirstSequence int64          `json:"first_sequence"`
	LastSequence  int64          `json:"last_sequence"`
	LedgerRows    []StatementRow `json:"ledger_rows,omitempty"`
}

// StatementRow is one ledger row behind a statement line.
type StatementRow struct {
	ID           int64     `json:"id"`
	Amount       string    `json:"amount"`
	RecordID     string    `json:"record_id"`
	SettlementID string    `json:"settlement_id"`
	Sequence     int64     `json:"sequence"`
	At           time.Time `json:"at"`
}

// Statement builds a tenant's statement for one period. It reads through
// the read side only: one REPEATABLE READ, READ ONLY transaction under
// ReaderRole, so every figure comes from one snapshot and nothing can be
// written.
func (s *Store) Statement(ctx context.Context, in StatementInput) (*Statement, error) {
	if in.TenantID == "" || !validPeriod(in.Period) {
		return nil, fmt.Errorf("%w: statement needs a tenant and a period YYYY-MM (got %q, %q)", ErrBadFilter, in.TenantID, in.Period)
	}
	what := fmt.Sprintf("statement tenant=%s period=%s", in.TenantID, in.Period)
	st := &Statement{TenantID: in.TenantID, Period: in.Period, Accounts: []StatementAccount{}}
	err := s.readOnly(ctx, what, func(tx pgx.Tx) error { return statementTx(ctx, db.On(tx), in, st) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return st, nil
}

func statementTx(ctx context.Context, q *db.Queries, in StatementInput, st *Statement) error {
	switch p, err := q.PeriodGet(ctx, db.PeriodGetParams{TenantID: in.TenantID, AccountPeriod: in.Period}); {
	case err == nil:
		st.ClosedAt, st.ClosedBy = &p.ClosedAt, p.ClosedBy
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("period: %w", err)
	}
	b := &statementBuild{byID: map[int64]*stmtAccount{}, lineIndex: map[int64]map[[4]string]int{}}
	if err := b.readAccounts(ctx, q, in); err != nil {
		return fmt.Errorf("accounts: %w", err)
	}
	if err := b.readLines(ctx, q, in); err != nil {
		return fmt.Errorf("lines: %w", err)
	}
	// The lines count their rows: a listing over the limit is refused
	// before it is read.
	if in.Rows {
		var n int64
		for _, a := range b.all {
			for _, l := range a.Lines {
				n += l.Rows
			}
		}
		if rowsMax := cmp.Or(in.rowsMax, StatementRowsMax); n > int64(rowsMax) {
			return fmt.Errorf("%w: the period has %d ledger rows, more than the %d a statement lists: take the statement without its rows, or one subject at a time", ErrBadFilter, n, rowsMax)
		}
	}
	if err := b.readSequences(ctx, q, in); err != nil {
		return fmt.Errorf("sequences: %w", err)
	}
	if in.Rows {
		if err := statementRows(ctx, q, in, b.byID, b.lineIndex, b.all); err != nil {
			return err
		}
	}
	for _, id := range b.order {
		x := b.byID[id]
		closeAccount(&b.all[x.i], x)
	}
	st.Accounts = b.all
	if st.Accounts == nil {
		st.Accounts = []StatementAccount{}
	}
	return nil
}

// statementBuild is a statement's accounts while they are read.
type statementBuild struct {
	byID      map[int64]*stmtAccount
	order     []int64 // account ids, in the statement's order
	all       []StatementAccount
	lineIndex map[int64]map[[4]string]int // account id -> line key -> index in Lines
}

// readAccounts reads the tenant's accounts that have a statement for the
// period, with their sums outside it.
func (b *statementBuild) readAccounts(ctx context.Context, q *db.Queries, in StatementInput) error {
	rows, err := q.StatementAccounts(ctx, db.StatementAccountsParams{TenantID: in.TenantID, Period: in.Period, Subject: in.Subject})
	if err != nil {
		return err
	}
	for _, r := range rows {
		x := &stmtAccount{i: len(b.all), opening: money.MustParse(r.OpeningBalance), openingHeld: money.MustParse(r.OpeningHeld),
			later: money.MustParse(r.LaterBalance), lhd: money.MustParse(r.LaterHeld), orphans: r.OrphanRows}
		// An account with nothing in the period and nothing before it has
		// no statement for it.
		if r.PeriodRows == 0 && x.opening.IsZero() && x.openingHeld.IsZero() && r.OrphanRows == 0 {
			continue
		}
		a := StatementAccount{Subject: r.Subject, Currency: r.Currency, Balance: r.Balance, Held: r.Held, Lines: []StatementLine{}}
		b.byID[r.ID], b.order, b.all = x, append(b.order, r.ID), append(b.all, a)
	}
	return nil
}

// readLines reads the accounts' lines of the period.
func (b *statementBuild) readLines(ctx context.Context, q *db.Queries, in StatementInput) error {
	rows, err := q.StatementLines(ctx, db.StatementLinesParams{TenantID: in.TenantID, Period: in.Period, Subject: in.Subject})
	if err != nil {
		return err
	}
	for _, r := range rows {
		id := r.AccountID
		l := StatementLine{Operation: r.Operation, Bucket: r.Bucket, Meter: r.Meter, Late: r.Late, Amount: r.Amount, Rows: r.Rows,
			Settlements: r.Settlements, FirstRowID: r.FirstRowID, LastRowID: r.LastRowID, FirstSequence: r.FirstSequence,
			LastSequence: r.LastSequence}
		x := b.byID[id]
		if x == nil {
			continue // not possible: the account has rows in the period
		}
		l.Category = lineCategory(l.Operation, l.Bucket, r.Part)
		a := &b.all[x.i]
		a.Lines = append(a.Lines, l)
	}
	for _, id := range b.order {
		a := &b.all[b.byID[id].i]
		sortLines(a.Lines)
		b.lineIndex[id] = make(map[[4]string]int, len(a.Lines))
		for i, l := range a.Lines {
			b.lineIndex[id][lineKey(l.Operation, l.Category, l.Meter, l.Late)] = i
		}
	}
	return nil
}

// readSequences reads each account's settlements of the period and their
// first and last sequence.
func (b *statementBuild) readSequences(ctx context.Context, q *db.Queries, in StatementInput) error {
	rows, err := q.StatementSequences(ctx, db.StatementSequencesParams{TenantID: in.TenantID, Period: in.Period, Subject: in.Subject})
	if err != nil {
		return err
	}
	for _, r := range rows {
		if x := b.byID[r.AccountID]; x != nil {
			b.all[x.i].Settlements, b.all[x.i].FirstSequence, b.all[x.i].LastSequence = r.Settlements, r.FirstSequence, r.LastSequence
		}
	}
	return nil
}

// closeAccount sums an account's lines into its closing balances and checks
// them against the account's balance (its newest row's).
func closeAccount(a *StatementAccount, x *stmtAccount) {
	closing, closingHeld := x.opening, x.openingHeld
	for _, l := range a.Lines {
		amt := money.MustParse(l.Amount)
		if l.Bucket == "held" {
			closingHeld = closingHeld.Add(amt)
		} else {
			closing = closing.Add(amt)
		}
	}
	a.OpeningBalance, a.OpeningHeld = x.opening.String(), x.openingHeld.String()
	a.ClosingBalance, a.ClosingHeld = closing.String(), closingHeld.String()
	a.LaterBalance, a.LaterHeld = x.later.String(), x.lhd.String()
	// The pair: the statement's own sums against the account's cached
	// balance, which the settling transaction keeps.
	bal, held := money.MustParse(a.Balance), money.MustParse(a.Held)
	a.Balance, a.Held = bal.String(), held.String()
	a.Ties = true
	switch {
	case x.orphans > 0:
		a.Ties, a.Mismatch = false, fmt.Sprintf("%d ledger rows of the account name no identity (run settle reconcile)", x.orphans)
	case closing.Add(x.later).Cmp(bal) != 0 || closingHeld.Add(x.lhd).Cmp(held) != 0:
		a.Ties = false
		a.Mismatch = fmt.Sprintf("closing %s + later periods %s = %s, held %s + %s = %s; the account shows balance %s, held %s (run settle reconcile)",
			closing, x.later, closing.Add(x.later), closingHeld, x.lhd, closingHeld.Add(x.lhd), bal, held)
	}
}

// lineKey names a line of an account: the category says the bucket.
func lineKey(op, category, meter string, late bool) [4]string {
	l := ""
	if late {
		l = "late"
	}
	return [4]string{op, category, meter, l}
}

// stmtAccount is an account's sums outside the period while its
// statement is built.
type stmtAccount struct {
	i                                int // index in the statement's accounts
	opening, openingHeld, later, lhd money.Dec
	orphans                          int64 // rows that name no identity
}

// statementRows puts every ledger row of the period under its line.
func statementRows(ctx context.Context, q *db.Queries, in StatementInput, byID map[int64]*stmtAccount, lineIndex map[int64]map[[4]string]int, all []StatementAccount) error {
	rows, err := q.StatementRows(ctx, db.StatementRowsParams{TenantID: in.TenantID, Period: in.Period, Subject: in.Subject,
		RowsMax: StatementRowsMax + 1})
	if err != nil {
		return fmt.Errorf("rows: %w", err)
	}
	for n, row := range rows {
		if n+1 > StatementRowsMax {
			return fmt.Errorf("%w: the period has more than %d ledger rows: take the statement without its rows, or one subject at a time", ErrBadFilter, StatementRowsMax)
		}
		id := row.AccountID
		r := StatementRow{ID: row.ID, Amount: row.Amount, RecordID: row.RecordID, SettlementID: row.SettlementID,
			Sequence: row.Sequence, At: row.CreatedAt}
		x := byID[id]
		if x == nil {
			continue
		}
		li, ok := lineIndex[id][lineKey(row.Operation, lineCategory(row.Operation, row.Bucket, row.Part), row.Meter, row.Late)]
		if !ok {
			return fmt.Errorf("rows: ledger row %d has no line (the snapshot changed?)", r.ID)
		}
		l := &all[x.i].Lines[li]
		l.LedgerRows = append(l.LedgerRows, r)
	}
	return nil
}

// validPeriod reports whether p is YYYY-MM with a month of 01 to 12.
func validPeriod(p string) bool {
	if len(p) != 7 || p[4] != '-' {
		return false
	}
	_, err := time.Parse("2006-01", p)
	return err == nil
}
