package reconcile

// Month end: a source system's own export of its final records, compared
// with what settle holds, by scoped identity (settle reconcile --source).
//
// Memory is bounded by the identities of the asked tenant and period range,
// never by the file: the export is read once, a chunk of identities at a
// time (looked up in one query with arrays); per identity only a 16-byte
// entry (its hash and fingerprint) stays, and per chain member a small node
// for the net charge check (about 400 bytes live per usage in all;
// docs/operations.md, "Memory"). Settle's side is read once, paged by key, for
// what the source lacks.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/schema"
)

// Limits of a source check.
const (
	// SourceChunkIdentitiesMax is how many source identities one look-up
	// query carries.
	SourceChunkIdentitiesMax = 5000
	// SourceFindingsMax caps the findings a report lists; the counts go on.
	SourceFindingsMax = 10_000
	// sourceChainDepthMax bounds how far a correction's chain is followed
	// back to its root usage in the source.
	sourceChainDepthMax = 10_000
	// sourcePageRowsMax is one page of settle's side or of dead letters.
	sourcePageRowsMax = 5000
)

// Source check finding classes.
const (
	ClassSourceMissing       = "missing"            // in the source, not settled
	ClassSourceExtra         = "extra"              // settled, absent from the source
	ClassSourceDifferent     = "different"          // one identity, another canonical payload
	ClassSourceNetDiffers    = "net_charge_differs" // a chain's charge differs from the source's final amount
	ClassSourceInvalid       = "source_invalid"     // a source line that does not decode
	ClassSourceContradicts   = "source_contradicts" // the source has two payloads for one identity
	ClassSourceExtraUnplaced = "extra_unlocated"    // settled identities the source lacks that the scan could not name
)

// What settle saw of a missing record (SourceFinding.Seen).
const (
	SeenNever        = "never"         // no identity, no waiting operation, no dead letter
	SeenWaiting      = "waiting"       // waiting for its target
	SeenOrphaned     = "orphaned"      // waited past the orphan timeout: a case is open
	SeenQuarantined  = "quarantined"   // its identity is quarantined (a case)
	SeenDeadLettered = "dead_lettered" // a dead letter names it
)

// SourceLine is one line (record) of a source export, decoded by the
// caller with the settle decoder. Err is set when it does not decode.
type SourceLine struct {
	Line   int64
	Record record.Record
	Err    error
}

// SourceLines yields a source export's records in file order; io.EOF ends
// it. Another error ends the check with that error.
type SourceLines interface {
	Next() (SourceLine, error)
}

// SourceProgress is how far a source check got.
type SourceProgress struct {
	Lines      int64 `json:"lines"`
	InScope    int64 `json:"in_scope"`
	Identities int64 `json:"identities"`
	Findings   int64 `json:"findings"`
	Done       bool  `json:"done"`
}

// SourceCheckInput says which export is compared with what.
type SourceCheckInput struct {
	TenantID string
	// From and To are the period range (YYYY-MM, inclusive); To "" = From.
	From, To string
	// Operations are the kinds the export holds; settle's identities of
	// other operations are not "extra". nil = every input kind.
	Operations []string
	// Progress, when set, is called about every ProgressEvery lines or
	// second, and once at the end.
	Progress      func(SourceProgress)
	ProgressEvery int64 // 0 = 100,000
}

// FieldDiff is one field that differs between settle's stored canonical
// payload and the source's, as a conflict case shows it.
type FieldDiff struct {
	Field  string `json:"field"`
	Settle string `json:"settle"`
	Source string `json:"source"`
}

// SourceFinding is one difference between a source export and settle.
type SourceFinding struct {
	Class        string      `json:"class"`
	Period       string      `json:"account_period,omitempty"`
	RecordID     string      `json:"record_id,omitempty"`
	Operation    string      `json:"operation,omitempty"`
	Line         int64       `json:"line,omitempty"` // in the source
	SettlementID string      `json:"settlement_id,omitempty"`
	Seen         string      `json:"seen,omitempty"`   // missing: what settle saw of it
	Reason       string      `json:"reason,omitempty"` // quarantine or dead-letter reason, decode error
	CaseID       int64       `json:"case_id,omitempty"`
	Diff         []FieldDiff `json:"diff,omitempty"`
	Currency     string      `json:"currency,omitempty"`
	SourceAmount string      `json:"source_amount,omitempty"`
	SettleAmount string      `json:"settle_amount,omitempty"`
	Detail       string      `json:"detail"`
}

// SourceTotal is one period and currency's charges on both sides: the sum
// of every chain's charge (usage after corrections, refunds and reclaims),
// by its root usage's period.
type SourceTotal struct {
	Period       string `json:"account_period"`
	Currency     string `json:"currency"`
	Source       string `json:"source"`
	Settle       string `json:"settle"`
	Difference   string `json:"difference"` // settle - source
	SourceChains int64  `json:"source_chains"`
	SettleChains int64  `json:"settle_chains"`
}

// SourcePeriod counts one period's identities and findings.
type SourcePeriod struct {
	Period     string         `json:"account_period"`
	Identities int64          `json:"source_identities"`
	Matched    int64          `json:"matched"` // settled or refused with the same payload
	Refused    int64          `json:"refused"` // of those, refused (no effect, by the contract)
	ByClass    map[string]int `json:"findings"`
}

// SourceReport is what a source check found. It agrees when there is no
// finding and every total's difference is zero.
type SourceReport struct {
	TenantID   string          `json:"tenant_id"`
	From       string          `json:"from"`
	To         string          `json:"to"`
	Lines      int64           `json:"lines"`
	OutOfScope int64           `json:"out_of_scope"` // another tenant, period or operation
	Duplicates int64           `json:"duplicates"`   // repeated identities with the same payload
	Periods    []SourcePeriod  `json:"periods"`
	Totals     []SourceTotal   `json:"totals"`
	Findings   []SourceFinding `json:"findings"`
	Counts     map[string]int  `json:"counts"`              // findings by class, including those not listed
	Truncated  bool            `json:"truncated,omitempty"` // more findings than SourceFindingsMax
}

// Agrees reports whether both sides agree.
func (r *SourceReport) Agrees() bool {
	if len(r.Counts) > 0 {
		return false
	}
	for _, t := range r.Totals {
		if money.MustParse(t.Difference).Sign() != 0 {
			return false
		}
	}
	return true
}

type sourceCheck struct {
	dec *record.Decoder
	q   *db.Queries // over the check's READ ONLY transaction
	tx  pgx.Tx
	in  SourceCheckInput
	ops map[string]bool
	r   *SourceReport

	seen      map[uint64]uint64 // identity hash -> fingerprint
	chunk     []SourceLine
	periods   map[string]*SourcePeriod
	dead      map[record.Identity]deadLetterRef
	nodes     map[uint64]*recordNode
	matchedOK int64 // source identities settle has settled (for the extra check)
}

// CheckSource compares a source export of one tenant and period range
// with what settle holds, by scoped identity, and reports per period what
// is missing, extra and different, the chains whose charge differs, and
// the totals on both sides. It only reads: one REPEATABLE READ, READ ONLY
// transaction under schema.ReaderRole, so the whole report is of one
// snapshot and the check cannot write.
func CheckSource(ctx context.Context, store *settle.Store, in SourceCheckInput, src SourceLines) (*SourceReport, error) {
	if in.To == "" {
		in.To = in.From
	}
	if in.TenantID == "" || !record.ValidPeriod(in.From) || !record.ValidPeriod(in.To) || in.To < in.From {
		return nil, fmt.Errorf("a source check needs a tenant and a period range YYYY-MM to YYYY-MM (got %q, %q to %q)", in.TenantID, in.From, in.To)
	}
	if in.Operations == nil {
		for _, k := range record.Kinds {
			in.Operations = append(in.Operations, string(k))
		}
	}
	if in.ProgressEvery == 0 {
		in.ProgressEvery = 100_000
	}
	c := &sourceCheck{dec: store.Decoder(), in: in, ops: map[string]bool{},
		r: &SourceReport{TenantID: in.TenantID, From: in.From, To: in.To, Periods: []SourcePeriod{},
			Totals: []SourceTotal{}, Findings: []SourceFinding{}, Counts: map[string]int{}},
		seen: map[uint64]uint64{}, periods: map[string]*SourcePeriod{}, dead: map[record.Identity]deadLetterRef{},
		nodes: map[uint64]*recordNode{}}
	for _, op := range in.Operations {
		c.ops[op] = true
	}
	what := fmt.Sprintf("check source tenant=%s periods=%s..%s", in.TenantID, in.From, in.To)
	ck := &checker{pool: store.Pool(), cfg: store.Config()}
	tx, err := ck.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+schema.ReaderRole); err != nil {
		return nil, fmt.Errorf("%s: take on role %s (the login must be a member of it, or of settle_app; run settle migrate): %w", what, schema.ReaderRole, err)
	}
	c.q, c.tx = db.On(tx), tx
	if err := c.run(ctx, src); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return c.r, nil
}

func (c *sourceCheck) run(ctx context.Context, src SourceLines) error {
	if err := c.loadDeadLetters(ctx); err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	var inScope int64
	last := time.Now()
	progress := func(done bool) {
		if c.in.Progress != nil {
			c.in.Progress(SourceProgress{Lines: c.r.Lines, InScope: inScope, Identities: int64(len(c.seen)), Findings: int64(c.findings()), Done: done})
		}
	}
	for {
		l, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		c.r.Lines++
		if c.r.Lines%c.in.ProgressEvery == 0 || time.Since(last) >= time.Second {
			progress(false)
			last = time.Now()
		}
		if l.Err != nil {
			c.add(SourceFinding{Class: ClassSourceInvalid, Line: l.Line, Reason: l.Err.Error(),
				Detail: fmt.Sprintf("line %d does not decode: %v", l.Line, l.Err)})
			continue
		}
		r := &l.Record
		if r.TenantID != c.in.TenantID || r.AccountPeriod < c.in.From || r.AccountPeriod > c.in.To || !c.ops[string(r.Kind)] {
			c.r.OutOfScope++
			continue
		}
		inScope++
		canonical := fingerprint.Canonical(r)
		h, fp := identityHash(r.Identity()), fingerprint.Sum(canonical)
		if prev, ok := c.seen[h]; ok {
			if prev == fp {
				c.r.Duplicates++
			} else {
				c.add(SourceFinding{Class: ClassSourceContradicts, Period: r.AccountPeriod, RecordID: r.RecordID, Operation: string(r.Kind), Line: l.Line,
					Detail: fmt.Sprintf("line %d repeats an identity of the source with another payload; the first one is compared", l.Line)})
			}
			continue
		}
		c.seen[h] = fp
		c.period(r.AccountPeriod).Identities++
		c.chainMember(&l)
		c.chunk = append(c.chunk, l)
		if len(c.chunk) == SourceChunkIdentitiesMax {
			if err := c.flush(ctx); err != nil {
				return err
			}
		}
	}
	if err := c.flush(ctx); err != nil {
		return err
	}
	if err := c.scanExtra(ctx); err != nil {
		return fmt.Errorf("settled identities: %w", err)
	}
	if c.ops[string(record.KindUsage)] {
		if err := c.compareChains(ctx); err != nil {
			return fmt.Errorf("chains: %w", err)
		}
	}
	c.finish()
	progress(true)
	return nil
}

func (c *sourceCheck) period(p string) *SourcePeriod {
	sp := c.periods[p]
	if sp == nil {
		sp = &SourcePeriod{Period: p, ByClass: map[string]int{}}
		c.periods[p] = sp
	}
	return sp
}

func (c *sourceCheck) findings() int {
	n := 0
	for _, v := range c.r.Counts {
		n += v
	}
	return n
}

func (c *sourceCheck) add(f SourceFinding) {
	c.r.Counts[f.Class]++
	if f.Period != "" {
		c.period(f.Period).ByClass[f.Class]++
	}
	if len(c.r.Findings) >= SourceFindingsMax {
		c.r.Truncated = true
		return
	}
	c.r.Findings = append(c.r.Findings, f)
}

func (c *sourceCheck) finish() {
	ps := make([]string, 0, len(c.periods))
	for p := range c.periods {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	for _, p := range ps {
		c.r.Periods = append(c.r.Periods, *c.periods[p])
	}
	sort.SliceStable(c.r.Findings, func(i, j int) bool {
		a, b := c.r.Findings[i], c.r.Findings[j]
		if a.Period != b.Period {
			return a.Period < b.Period
		}
		return a.Class < b.Class
	})
}
