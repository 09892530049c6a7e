package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

type deadLetterRef struct {
	id     int64
	reason string
	err    string
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

// loadDeadLetters keeps the dead letters that name an identity of the
// asked scope: a record that does not decode under settle's rules may
// still say whose it is.
func (c *sourceCheck) loadDeadLetters(ctx context.Context) error {
	var after int64
	for {
		rows, err := c.q.SourceDeadLetters(ctx, db.SourceDeadLettersParams{AfterID: after, PageRows: sourcePageRowsMax})
		if err != nil {
			return err
		}
		for _, r := range rows {
			after = r.ID
			hs, _ := pgq.DecodeHeaders(r.Headers)
			id, ok := c.deadLetterIdentity(r.Value, hs)
			if ok {
				c.dead[id] = deadLetterRef{id: r.ID, reason: r.Reason, err: r.Error}
			}
		}
		if len(rows) < sourcePageRowsMax {
			return nil
		}
	}
}

func (c *sourceCheck) deadLetterIdentity(value []byte, hs []record.Header) (record.Identity, bool) {
	var id record.Identity
	if rec, err := c.dec.Decode(value, hs); err == nil {
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

// flush looks up one chunk of source identities in settle and reports
// those that are missing or different.
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
	found, err := c.storedIdentities(ctx, periods, recs, ops)
	if err != nil {
		return err
	}
	waits := map[sourceKey]sourceWait{}
	if len(found) < len(c.chunk) {
		if waits, err = c.waitingOps(ctx, periods, recs, ops); err != nil {
			return err
		}
	}
	for i := range c.chunk {
		l := &c.chunk[i]
		r := &l.Record
		k := sourceKey{r.AccountPeriod, r.RecordID, string(r.Kind)}
		f := SourceFinding{Period: r.AccountPeriod, RecordID: r.RecordID, Operation: string(r.Kind), Line: l.Line}
		st := found[k]
		if st == nil {
			c.add(c.missing(f, r, waits))
			continue
		}
		if err := c.compareStored(f, r, st); err != nil {
			return err
		}
	}
	return nil
}

// sourceKey is a source identity within the check's tenant.
type sourceKey struct{ period, record, op string }

// storedIdentity is what settle holds of a source identity.
type storedIdentity struct {
	outcome, reason, settlementID string
	version                       int
	canonical                     []byte
	caseID                        int64 // the key's newest conflict case; 0 = none
	caseReason, caseStatus        string
}

// sourceWait is a waiting operation settle holds for a source identity.
type sourceWait struct {
	status, targetPeriod, targetRecord string
	since                              time.Time
	caseID                             int64
}

// storedIdentities looks up the chunk's identities, in one query.
func (c *sourceCheck) storedIdentities(ctx context.Context, periods, recs, ops []string) (map[sourceKey]*storedIdentity, error) {
	found := map[sourceKey]*storedIdentity{}
	rows, err := c.q.SourceIdentities(ctx, db.SourceIdentitiesParams{TenantID: c.in.TenantID, Periods: periods, RecordIds: recs, Operations: ops})
	if err != nil {
		return nil, fmt.Errorf("identities: %w", err)
	}
	for _, r := range rows {
		found[sourceKey{r.AccountPeriod, r.RecordID, r.Operation}] = &storedIdentity{outcome: r.Outcome, reason: r.Reason,
			settlementID: r.SettlementID, version: int(r.CanonicalVersion), canonical: r.Canonical, caseID: r.CaseID,
			caseReason: r.CaseReason, caseStatus: r.CaseStatus}
	}
	return found, nil
}

// waitingOps looks up the waiting operations of the chunk's identities, in
// one query.
func (c *sourceCheck) waitingOps(ctx context.Context, periods, recs, ops []string) (map[sourceKey]sourceWait, error) {
	waits := map[sourceKey]sourceWait{}
	rows, err := c.q.SourceWaiting(ctx, db.SourceWaitingParams{TenantID: c.in.TenantID, Periods: periods, RecordIds: recs, Operations: ops})
	if err != nil {
		return nil, fmt.Errorf("waiting: %w", err)
	}
	for _, r := range rows {
		waits[sourceKey{r.AccountPeriod, r.RecordID, r.Operation}] = sourceWait{status: r.Status, targetPeriod: r.TargetPeriod,
			targetRecord: r.TargetRecordID, since: r.Since, caseID: r.CaseID}
	}
	return waits, nil
}

// missing completes f for a source record settle has no identity of: what
// settle saw of it instead.
func (c *sourceCheck) missing(f SourceFinding, r *record.Record, waits map[sourceKey]sourceWait) SourceFinding {
	f.Class = ClassSourceMissing
	if w, ok := waits[sourceKey{r.AccountPeriod, r.RecordID, string(r.Kind)}]; ok {
		f.Seen, f.CaseID = SeenWaiting, w.caseID
		f.Detail = fmt.Sprintf("waiting since %s for its target %s/%s", w.since.UTC().Format(time.RFC3339), w.targetPeriod, w.targetRecord)
		if w.status == "orphaned" {
			f.Seen, f.Reason = SeenOrphaned, message.ReasonOrphan
			f.Detail = fmt.Sprintf("orphaned: its target %s/%s never arrived (case %d)", w.targetPeriod, w.targetRecord, w.caseID)
		}
	} else if d, ok := c.dead[r.Identity()]; ok {
		f.Seen, f.Reason = SeenDeadLettered, d.reason
		f.Detail = fmt.Sprintf("dead-lettered %s (dead letter %d): %s", d.reason, d.id, d.err)
	} else {
		f.Seen, f.Detail = SeenNever, "settle has no identity, waiting operation or dead letter for it"
	}
	return f
}

// compareStored compares a source record with the identity settle holds of
// it: a quarantined one counts as missing, another payload as different,
// the same payload as matched.
func (c *sourceCheck) compareStored(f SourceFinding, r *record.Record, st *storedIdentity) error {
	f.SettlementID = st.settlementID
	if st.outcome == string(message.OutcomeQuarantined) {
		f.Class, f.Seen, f.Reason = ClassSourceMissing, SeenQuarantined, st.reason
		f.CaseID = st.caseID
		f.Detail = fmt.Sprintf("quarantined %s (case %d)", st.reason, f.CaseID)
		c.add(f)
		return nil
	}
	incoming, err := fingerprint.CanonicalAt(st.version, r)
	if err != nil {
		return fmt.Errorf("%s: %w", r.Identity(), err)
	}
	if !bytes.Equal(incoming, st.canonical) {
		ds, err := fingerprint.Diff(st.canonical, incoming)
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
		if st.caseID != 0 {
			f.CaseID, f.Reason = st.caseID, st.caseReason
			f.Detail += fmt.Sprintf(" (case %d, %s, %s)", st.caseID, st.caseReason, st.caseStatus)
		}
		c.add(f)
	} else {
		sp := c.period(r.AccountPeriod)
		sp.Matched++
		if st.outcome == string(message.OutcomeRefused) {
			sp.Refused++
		}
	}
	if st.outcome == string(message.OutcomeSettled) {
		c.matchedOK++
	}
	return nil
}

// scanExtra reads settle's settled identities of the scope once, in id
// order, and reports those the source lacks.
// settledScanPlan is what the settled-identities scan's page runs under:
// with sorts priced out, PostgreSQL reads the page as one ordered range of
// identities_scope_key and stops at the page's end. Left to its
// statistics, on a tenant just loaded and not yet analysed it estimates a
// page at one row and reads every remaining identity of the range through
// a bitmap and sorts them, page after page: quadratic in the tenant.
const settledScanPlan = "SET LOCAL enable_sort = off"

// settledPage reads one page of the settled-identities scan
// (settledScanPlan), and restores the planner's setting for the check's
// other queries.
func (c *sourceCheck) settledPage(ctx context.Context, p db.SourceSettledScanParams) ([]db.SourceSettledScanRow, error) {
	if _, err := c.tx.Exec(ctx, settledScanPlan); err != nil {
		return nil, err
	}
	rows, err := c.q.SourceSettledScan(ctx, p)
	if err != nil {
		return nil, err
	}
	if _, err := c.tx.Exec(ctx, "RESET enable_sort"); err != nil {
		return nil, err
	}
	return rows, nil
}

// scanStart is the first page of the settled-identities scan: after the
// key (from, "", ""), which every identity of the range follows.
func (c *sourceCheck) scanStart() db.SourceSettledScanParams {
	return db.SourceSettledScanParams{TenantID: c.in.TenantID, AfterPeriod: c.in.From, ToPeriod: c.in.To}
}

func (c *sourceCheck) scanExtra(ctx context.Context) error {
	var total, extra int64
	after := c.scanStart()
	for {
		after.Operations, after.PageRows = c.in.Operations, sourcePageRowsMax
		rows, err := c.settledPage(ctx, after)
		if err != nil {
			return err
		}
		for _, r := range rows {
			after.AfterPeriod, after.AfterRecordID, after.AfterOperation, total = r.AccountPeriod, r.RecordID, r.Operation, total+1
			key := record.Identity{TenantID: c.in.TenantID, AccountPeriod: r.AccountPeriod, RecordID: r.RecordID, Operation: record.Kind(r.Operation)}
			if _, ok := c.seen[identityHash(key)]; ok {
				continue
			}
			extra++
			c.add(SourceFinding{Class: ClassSourceExtra, Period: r.AccountPeriod, RecordID: r.RecordID, Operation: r.Operation,
				SettlementID: r.SettlementID, Currency: r.Currency, Detail: fmt.Sprintf("settled for %s, absent from the source", r.Subject)})
		}
		if len(rows) < sourcePageRowsMax {
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
