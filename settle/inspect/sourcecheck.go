package inspect

// Month end: a source system's own export of its final records, compared
// with what settle holds, by scoped identity (settle reconcile --source).
//
// Memory is bounded by the identities of the asked tenant and period range,
// never by the file: the export is read once, a chunk of identities at a
// time (looked up in one query with arrays); per identity only a 16-byte
// entry (its hash and fingerprint) stays, and per chain member a small node
// for the net charge check. Settle's side is read once, keyset-ordered, for
// what the source lacks.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/settlehq/settle/settle"

	"github.com/cespare/xxhash/v2"
	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/record"
)

var (
	sqlSourceIdentities  = mustQuery("source_identities.sql")
	sqlSourceWaiting     = mustQuery("source_waiting.sql")
	sqlSourceDeadLetters = mustQuery("source_dead_letters.sql")
	sqlSourceSettledScan = mustQuery("source_settled_scan.sql")
	sqlSourceChainNet    = mustQuery("source_chain_net.sql")
	sqlSourceChainTotals = mustQuery("source_chain_totals.sql")
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

// chainNode is a source usage, correction or reversal, by the hash of its
// (period, record_id): what its chain needs.
type chainNode struct {
	parent    uint64 // the member it corrects; 0 for a usage
	line      int64
	version   int64  // 0 for a reversal without one
	amount    string // "" for a reversal
	reversal  bool
	root      *chainRoot // set for a usage
	refund    bool
	reclaim   bool
	resolved  *chainRoot
	resolving bool
}

// chainRoot is a source chain's root usage and its final state.
type chainRoot struct {
	period, recordID, currency string
	line                       int64
	version                    int64
	winLine                    int64 // the line of the record that set version and amount
	amount                     string
	versionless                bool // a reversal without a version: last by definition
	refund, reclaim            bool
}

func (c *chainRoot) expected() money.Dec {
	if c.refund && !c.reclaim {
		return money.Dec{}
	}
	if c.versionless {
		return money.Dec{}
	}
	return money.MustParse(c.amount)
}

type sourceCheck struct {
	s   *Store
	tx  pgx.Tx
	in  SourceCheckInput
	ops map[string]bool
	r   *SourceReport

	seen      map[uint64]uint64 // identity hash -> fingerprint
	chunk     []SourceLine
	periods   map[string]*SourcePeriod
	dead      map[record.Identity]deadLetterRef
	nodes     map[uint64]*chainNode
	matchedOK int64 // source identities settle has settled (for the extra check)
}

type deadLetterRef struct {
	id     int64
	reason string
	err    string
}

// CheckSource compares a source export of one tenant and period range
// with what settle holds, by scoped identity, and reports per period what
// is missing, extra and different, the chains whose charge differs, and
// the totals on both sides. It reads through the read side only: one
// REPEATABLE READ, READ ONLY transaction under ReaderRole, so the whole
// report is of one snapshot and the check cannot write.
func (s *Store) CheckSource(ctx context.Context, in SourceCheckInput, src SourceLines) (*SourceReport, error) {
	if in.To == "" {
		in.To = in.From
	}
	if in.TenantID == "" || !validPeriod(in.From) || !validPeriod(in.To) || in.To < in.From {
		return nil, fmt.Errorf("%w: a source check needs a tenant and a period range YYYY-MM to YYYY-MM (got %q, %q to %q)", ErrBadFilter, in.TenantID, in.From, in.To)
	}
	if in.Operations == nil {
		for _, k := range record.Kinds {
			in.Operations = append(in.Operations, string(k))
		}
	}
	if in.ProgressEvery == 0 {
		in.ProgressEvery = 100_000
	}
	c := &sourceCheck{s: s, in: in, ops: map[string]bool{},
		r: &SourceReport{TenantID: in.TenantID, From: in.From, To: in.To, Periods: []SourcePeriod{},
			Totals: []SourceTotal{}, Findings: []SourceFinding{}, Counts: map[string]int{}},
		seen: map[uint64]uint64{}, periods: map[string]*SourcePeriod{}, dead: map[record.Identity]deadLetterRef{},
		nodes: map[uint64]*chainNode{}}
	for _, op := range in.Operations {
		c.ops[op] = true
	}
	what := fmt.Sprintf("check source tenant=%s periods=%s..%s", in.TenantID, in.From, in.To)
	err := s.readOnly(ctx, what, func(tx pgx.Tx) error {
		c.tx = tx
		return c.run(ctx, src)
	})
	if err != nil {
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
		canonical := record.Canonical(r)
		h, fp := identityHash(r.Identity()), record.Sum(canonical)
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

// identityHash is the 64-bit hash an identity is remembered by. Two
// identities of one export colliding (odds about n²/2⁶⁵) would hide one of
// them; the extra scan's count check reports what it could not name.
func identityHash(id record.Identity) uint64 {
	d := xxhash.New()
	d.WriteString(id.TenantID)
	d.Write([]byte{0})
	d.WriteString(id.AccountPeriod)
	d.Write([]byte{0})
	d.WriteString(id.RecordID)
	d.Write([]byte{0})
	d.WriteString(string(id.Operation))
	return d.Sum64()
}

// memberHash names a chain member: a usage, correction or reversal by
// (period, record_id), the way a correction, refund or reclaim names it.
func memberHash(period, recordID string) uint64 {
	d := xxhash.New()
	d.WriteString(period)
	d.Write([]byte{0})
	d.WriteString(recordID)
	return d.Sum64() | 1 // never 0: 0 is "no parent"
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

// chainMember remembers what the net charge check needs of a record.
func (c *sourceCheck) chainMember(l *SourceLine) {
	r := &l.Record
	node := func(h uint64) *chainNode {
		n := c.nodes[h]
		if n == nil {
			n = &chainNode{}
			c.nodes[h] = n
		}
		return n
	}
	switch r.Kind {
	case record.KindUsage:
		n := node(memberHash(r.AccountPeriod, r.RecordID))
		n.version, n.amount, n.line = r.FinalizationVersion, r.Amount, l.Line
		n.root = &chainRoot{period: r.AccountPeriod, recordID: r.RecordID, currency: r.Currency, line: l.Line}
	case record.KindCorrection, record.KindReversal:
		n := node(memberHash(r.AccountPeriod, r.RecordID))
		n.parent, n.version, n.amount, n.line = memberHash(r.TargetPeriod(), r.Corrects), r.FinalizationVersion, r.Amount, l.Line
		n.reversal = r.Kind == record.KindReversal
	case record.KindRefund:
		node(memberHash(r.AccountPeriod, r.RecordID)).refund = true
	case record.KindReclaim:
		node(memberHash(r.AccountPeriod, r.RecordID)).reclaim = true
	}
}

// loadDeadLetters keeps the dead letters that name an identity of the
// asked scope: a record that does not decode under settle's rules may
// still say whose it is.
func (c *sourceCheck) loadDeadLetters(ctx context.Context) error {
	var after int64
	for {
		rows, err := c.tx.Query(ctx, sqlSourceDeadLetters, after, sourcePageRowsMax)
		if err != nil {
			return err
		}
		n := 0
		for rows.Next() {
			var (
				ref            deadLetterRef
				value, headers []byte
			)
			if err := rows.Scan(&ref.id, &value, &headers, &ref.reason, &ref.err); err != nil {
				rows.Close()
				return err
			}
			n, after = n+1, ref.id
			hs, _ := settle.DecodeHeaders(headers)
			id, ok := c.deadLetterIdentity(value, hs)
			if ok {
				c.dead[id] = ref
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if n < sourcePageRowsMax {
			return nil
		}
	}
}

func (c *sourceCheck) deadLetterIdentity(value []byte, hs []record.Header) (record.Identity, bool) {
	var id record.Identity
	if rec, err := c.s.dec.Decode(value, hs); err == nil {
		id = rec.Identity()
	} else {
		// Out of form for settle: read what it says it is, loosely.
		var m map[string]json.RawMessage
		if json.Unmarshal(value, &m) != nil {
			return id, false
		}
		if data, ok := m["data"]; ok { // a structured CloudEvent
			var dm map[string]json.RawMessage
			if json.Unmarshal(data, &dm) == nil {
				for k, v := range dm {
					if _, dup := m[k]; !dup {
						m[k] = v
					}
				}
			}
		}
		str := func(keys ...string) string {
			for _, k := range keys {
				var s string
				if json.Unmarshal(m[k], &s) == nil && s != "" {
					return s
				}
			}
			return ""
		}
		kind := str("kind", "type")
		for _, k := range record.Kinds {
			if kind == string(k) || (len(kind) > len(k) && kind[len(kind)-len(k)-1:] == "."+string(k)) {
				kind = string(k)
			}
		}
		id = record.Identity{TenantID: str("tenant_id", "tenantid"), AccountPeriod: str("account_period"),
			RecordID: str("record_id", "id"), Operation: record.Kind(kind)}
	}
	in := id.TenantID == c.in.TenantID && id.AccountPeriod >= c.in.From && id.AccountPeriod <= c.in.To && c.ops[string(id.Operation)]
	return id, in
}

// flush looks up one chunk of source identities in settle.
func (c *sourceCheck) flush(ctx context.Context) error {
	if len(c.chunk) == 0 {
		return nil
	}
	defer func() { c.chunk = c.chunk[:0] }()
	periods, recs, ops := make([]string, len(c.chunk)), make([]string, len(c.chunk)), make([]string, len(c.chunk))
	for i := range c.chunk {
		r := &c.chunk[i].Record
		periods[i], recs[i], ops[i] = r.AccountPeriod, r.RecordID, string(r.Kind)
	}
	type stored struct {
		outcome, reason, settlementID string
		version                       int
		canonical                     []byte
		caseID                        *int64
		caseReason, caseStatus        *string
	}
	type key struct{ period, record, op string }
	found := map[key]*stored{}
	rows, err := c.tx.Query(ctx, sqlSourceIdentities, c.in.TenantID, periods, recs, ops)
	if err != nil {
		return fmt.Errorf("identities: %w", err)
	}
	for rows.Next() {
		var (
			k  key
			st stored
			id int64
		)
		if err := rows.Scan(&k.period, &k.record, &k.op, &id, &st.outcome, &st.reason, &st.version, &st.canonical, &st.settlementID,
			&st.caseID, &st.caseReason, &st.caseStatus); err != nil {
			rows.Close()
			return fmt.Errorf("identities: %w", err)
		}
		found[k] = &st
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("identities: %w", err)
	}
	type wait struct {
		status, targetPeriod, targetRecord string
		since                              time.Time
		caseID                             int64
	}
	waits := map[key]wait{}
	if len(found) < len(c.chunk) {
		rows, err := c.tx.Query(ctx, sqlSourceWaiting, c.in.TenantID, periods, recs, ops)
		if err != nil {
			return fmt.Errorf("waiting: %w", err)
		}
		for rows.Next() {
			var (
				k key
				w wait
			)
			if err := rows.Scan(&k.period, &k.record, &k.op, &w.status, &w.targetPeriod, &w.targetRecord, &w.since, &w.caseID); err != nil {
				rows.Close()
				return fmt.Errorf("waiting: %w", err)
			}
			waits[k] = w
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("waiting: %w", err)
		}
	}
	for i := range c.chunk {
		l := &c.chunk[i]
		r := &l.Record
		k := key{r.AccountPeriod, r.RecordID, string(r.Kind)}
		f := SourceFinding{Period: r.AccountPeriod, RecordID: r.RecordID, Operation: string(r.Kind), Line: l.Line}
		st := found[k]
		if st == nil {
			f.Class = ClassSourceMissing
			if w, ok := waits[k]; ok {
				f.Seen, f.CaseID = SeenWaiting, w.caseID
				f.Detail = fmt.Sprintf("waiting since %s for its target %s/%s", w.since.UTC().Format(time.RFC3339), w.targetPeriod, w.targetRecord)
				if w.status == "orphaned" {
					f.Seen, f.Reason = SeenOrphaned, settle.ReasonOrphan
					f.Detail = fmt.Sprintf("orphaned: its target %s/%s never arrived (case %d)", w.targetPeriod, w.targetRecord, w.caseID)
				}
			} else if d, ok := c.dead[r.Identity()]; ok {
				f.Seen, f.Reason = SeenDeadLettered, d.reason
				f.Detail = fmt.Sprintf("dead-lettered %s (dead letter %d): %s", d.reason, d.id, d.err)
			} else {
				f.Seen, f.Detail = SeenNever, "settle has no identity, waiting operation or dead letter for it"
			}
			c.add(f)
			continue
		}
		f.SettlementID = st.settlementID
		if st.outcome == string(settle.OutcomeQuarantined) {
			f.Class, f.Seen, f.Reason = ClassSourceMissing, SeenQuarantined, st.reason
			if st.caseID != nil {
				f.CaseID = *st.caseID
			}
			f.Detail = fmt.Sprintf("quarantined %s (case %d)", st.reason, f.CaseID)
			c.add(f)
			continue
		}
		incoming, err := record.CanonicalAt(st.version, r)
		if err != nil {
			return fmt.Errorf("%s: %w", r.Identity(), err)
		}
		if !bytes.Equal(incoming, st.canonical) {
			ds, err := record.Diff(st.canonical, incoming)
			if err != nil {
				return fmt.Errorf("%s: %w", r.Identity(), err)
			}
			f.Class = ClassSourceDifferent
			names := make([]string, len(ds))
			for j, d := range ds {
				f.Diff = append(f.Diff, FieldDiff{Field: d.Field, Settle: d.Stored, Source: d.Incoming})
				names[j] = d.Field
			}
			f.Detail = fmt.Sprintf("%s %s with another payload: %v differ", st.outcome, r.Kind, names)
			if st.caseID != nil {
				f.CaseID, f.Reason = *st.caseID, *st.caseReason
				f.Detail += fmt.Sprintf(" (case %d, %s, %s)", *st.caseID, *st.caseReason, *st.caseStatus)
			}
			c.add(f)
		} else {
			sp := c.period(r.AccountPeriod)
			sp.Matched++
			if st.outcome == string(settle.OutcomeRefused) {
				sp.Refused++
			}
		}
		if st.outcome == string(settle.OutcomeSettled) {
			c.matchedOK++
		}
	}
	return nil
}

// scanExtra reads settle's settled identities of the scope once, in id
// order, and reports those the source lacks.
func (c *sourceCheck) scanExtra(ctx context.Context) error {
	var after, total, extra int64
	for {
		rows, err := c.tx.Query(ctx, sqlSourceSettledScan, c.in.TenantID, c.in.From, c.in.To, c.in.Operations, after, sourcePageRowsMax)
		if err != nil {
			return err
		}
		n := 0
		for rows.Next() {
			var (
				id                                 int64
				period, recordID, op, sid, subject string
				currency                           string
			)
			if err := rows.Scan(&id, &period, &recordID, &op, &sid, &subject, &currency); err != nil {
				rows.Close()
				return err
			}
			n, after, total = n+1, id, total+1
			key := record.Identity{TenantID: c.in.TenantID, AccountPeriod: period, RecordID: recordID, Operation: record.Kind(op)}
			if _, ok := c.seen[identityHash(key)]; ok {
				continue
			}
			extra++
			c.add(SourceFinding{Class: ClassSourceExtra, Period: period, RecordID: recordID, Operation: op, SettlementID: sid, Currency: currency,
				Detail: fmt.Sprintf("settled for %s, absent from the source", subject)})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if n < sourcePageRowsMax {
			break
		}
	}
	// The pair: every settled identity is either matched or extra. A
	// shortfall is identities hidden by a hash collision with one of the
	// source's.
	if hidden := total - c.matchedOK - extra; hidden != 0 {
		c.add(SourceFinding{Class: ClassSourceExtraUnplaced,
			Detail: fmt.Sprintf("%d settled identities, %d matched, %d extra: %d extra the scan could not name (identity hash collision)", total, c.matchedOK, extra, hidden)})
	}
	return nil
}

// resolve finds the root of a source chain member.
func (c *sourceCheck) resolve(n *chainNode) *chainRoot {
	var path []*chainNode
	for depth := 0; n != nil && depth < sourceChainDepthMax; depth++ {
		if n.resolved != nil || n.root != nil {
			r := n.resolved
			if r == nil {
				r = n.root
			}
			for _, p := range path {
				p.resolved = r
			}
			return r
		}
		if n.resolving || n.parent == 0 {
			return nil // a cycle, or a refund target that is not in the source
		}
		n.resolving = true
		path = append(path, n)
		n = c.nodes[n.parent]
	}
	return nil
}

// compareChains works out each source chain's final charge and compares
// it with the charge settle's ledger rows make of the same chain, and both
// sides' totals.
func (c *sourceCheck) compareChains(ctx context.Context) error {
	for _, n := range c.nodes {
		root := c.resolve(n)
		if root == nil || (n.amount == "" && !n.reversal && n.root == nil) {
			if root != nil { // a refund or reclaim target only
				root.refund, root.reclaim = root.refund || n.refund, root.reclaim || n.reclaim
			}
			continue
		}
		root.refund, root.reclaim = root.refund || n.refund, root.reclaim || n.reclaim
		switch {
		case n.reversal && n.version == 0:
			root.versionless = true
		// The highest version is final; of two with one version (settle
		// quarantines the later one version_conflict) the first in the
		// file.
		case root.amount == "" || n.version > root.version || (n.version == root.version && n.line < root.winLine):
			root.version, root.amount, root.winLine = n.version, n.amount, n.line
			if n.reversal {
				root.amount = "0"
			}
		}
	}
	roots := make([]*chainRoot, 0, len(c.nodes))
	for _, n := range c.nodes {
		if n.root != nil {
			roots = append(roots, n.root)
		}
	}
	sort.Slice(roots, func(i, j int) bool { return roots[i].line < roots[j].line })
	type tkey struct{ period, currency string }
	totals := map[tkey]*SourceTotal{}
	total := func(k tkey) *SourceTotal {
		t := totals[k]
		if t == nil {
			t = &SourceTotal{Period: k.period, Currency: k.currency, Source: "0", Settle: "0"}
			totals[k] = t
		}
		return t
	}
	for _, r := range roots {
		t := total(tkey{r.period, r.currency})
		t.Source = money.MustParse(t.Source).Add(r.expected()).String()
		t.SourceChains++
	}
	for start := 0; start < len(roots); start += SourceChunkIdentitiesMax {
		part := roots[start:min(start+SourceChunkIdentitiesMax, len(roots))]
		periods, recs := make([]string, len(part)), make([]string, len(part))
		byKey := map[[2]string]*chainRoot{}
		for i, r := range part {
			periods[i], recs[i] = r.period, r.recordID
			byKey[[2]string{r.period, r.recordID}] = r
		}
		rows, err := c.tx.Query(ctx, sqlSourceChainNet, c.in.TenantID, periods, recs, c.in.From, c.in.To)
		if err != nil {
			return err
		}
		for rows.Next() {
			var period, recordID, currency, net string
			if err := rows.Scan(&period, &recordID, &currency, &net); err != nil {
				rows.Close()
				return err
			}
			r := byKey[[2]string{period, recordID}]
			if r == nil {
				continue
			}
			want, got := r.expected(), money.MustParse(net)
			if want.Cmp(got) != 0 || currency != r.currency {
				state := ""
				switch {
				case r.refund && r.reclaim:
					state = ", refunded and reclaimed"
				case r.refund:
					state = ", refunded"
				}
				c.add(SourceFinding{Class: ClassSourceNetDiffers, Period: period, RecordID: recordID, Operation: string(record.KindUsage),
					Line: r.line, Currency: r.currency, SourceAmount: want.String(), SettleAmount: got.String(),
					Detail: fmt.Sprintf("the source's final amount is %s %s (version %d%s); settle's ledger rows for the chain charge %s %s",
						want, r.currency, r.version, state, got, currency)})
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	rows, err := c.tx.Query(ctx, sqlSourceChainTotals, c.in.TenantID, c.in.From, c.in.To)
	if err != nil {
		return err
	}
	for rows.Next() {
		var (
			k   tkey
			sum string
			n   int64
		)
		if err := rows.Scan(&k.period, &k.currency, &sum, &n); err != nil {
			rows.Close()
			return err
		}
		t := total(k)
		t.Settle, t.SettleChains = money.MustParse(sum).String(), n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, t := range totals {
		t.Difference = money.MustParse(t.Settle).Sub(money.MustParse(t.Source)).String()
		c.r.Totals = append(c.r.Totals, *t)
	}
	sort.Slice(c.r.Totals, func(i, j int) bool {
		a, b := c.r.Totals[i], c.r.Totals[j]
		return a.Period < b.Period || (a.Period == b.Period && a.Currency < b.Currency)
	})
	return nil
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
