package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/settle/internal/db"
)

// ExpectedAccount is what one account must hold, by a model of a known
// input. Balance and Held are decimal text.
type ExpectedAccount struct {
	TenantID, Subject, Currency string
	Balance, Held               string
}

// ExpectedIdentity is what one identity must end as, by a model of a
// known input: its outcome and the ledger rows it wrote, in any order.
type ExpectedIdentity struct {
	TenantID, Period, RecordID, Operation string
	Outcome                               string
	Entries                               []ExpectedEntry
}

// ExpectedEntry is one ledger row an identity must have written. Amount is
// decimal text.
type ExpectedEntry struct {
	Bucket, Amount string
}

func (s *checker) checkIdentityDuplicates(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	rows, err := db.On(tx).ReconcileIdentityDuplicate(ctx, in.TenantID)
	return findings(rows, err, func(r db.ReconcileIdentityDuplicateRow) Finding {
		return Finding{Class: ClassIdentityDuplicated, TenantID: r.TenantID, Period: r.AccountPeriod, RecordID: r.RecordID, Operation: r.Operation,
			Detail: fmt.Sprintf("identity %s/%s/%s/%s is stored %d times (ids %d..%d); one logical record has one identity",
				r.TenantID, r.AccountPeriod, r.RecordID, r.Operation, r.Copies, r.FirstID, r.LastID)}
	})
}

func (s *checker) checkSequences(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	rows, err := db.On(tx).ReconcileSequence(ctx, in.TenantID)
	return findings(rows, err, func(r db.ReconcileSequenceRow) Finding {
		return Finding{Class: ClassSequenceBroken, AccountID: r.ID, TenantID: r.TenantID,
			Detail: fmt.Sprintf("account %s/%s/%s: seq %d, but %d settlements wrote rows to it or announce a sequence on it, carrying %d distinct sequences from %d to %d; they must be 1..seq, each once",
				r.TenantID, r.Subject, r.Currency, r.Seq, r.Settlements, r.Sequences, r.FirstSequence, r.LastSequence)}
	})
}

// sameAmount compares two decimal texts by value; text that does not
// parse is equal only to itself.
func sameAmount(a, b string) bool {
	x, errX := money.Parse(a)
	y, errY := money.Parse(b)
	if errX != nil || errY != nil {
		return a == b
	}
	return x.Cmp(y) == 0
}

// compareAccounts reports every expected account that is missing or holds
// another balance or held amount, and every stored account the model does
// not list.
func (s *checker) compareAccounts(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	rows, err := db.On(tx).ReconcileAccounts(ctx, in.TenantID)
	if err != nil {
		return nil, err
	}
	got := make(map[[3]string][2]string, len(rows))
	for _, r := range rows {
		got[[3]string{r.TenantID, r.Subject, r.Currency}] = [2]string{r.Balance, r.Held}
	}
	var out []Finding
	listed := map[[3]string]bool{}
	for _, a := range in.ExpectedAccounts {
		if in.TenantID != "" && a.TenantID != in.TenantID {
			continue
		}
		k := [3]string{a.TenantID, a.Subject, a.Currency}
		listed[k] = true
		g, ok := got[k]
		switch {
		case !ok:
			out = append(out, Finding{Class: ClassAccountModelMismatch, TenantID: a.TenantID,
				Detail: fmt.Sprintf("account %s/%s/%s is not stored; the model has balance %s, held %s", a.TenantID, a.Subject, a.Currency, a.Balance, a.Held)})
		case !sameAmount(g[0], a.Balance) || !sameAmount(g[1], a.Held):
			out = append(out, Finding{Class: ClassAccountModelMismatch, TenantID: a.TenantID,
				Detail: fmt.Sprintf("account %s/%s/%s: balance %s, held %s; the model has %s and %s", a.TenantID, a.Subject, a.Currency, g[0], g[1], a.Balance, a.Held)})
		}
	}
	var extra []Finding
	for k, g := range got {
		if !listed[k] {
			extra = append(extra, Finding{Class: ClassAccountModelMismatch, TenantID: k[0],
				Detail: fmt.Sprintf("account %s/%s/%s (balance %s, held %s) is not in the model", k[0], k[1], k[2], g[0], g[1])})
		}
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i].Detail < extra[j].Detail })
	return append(out, extra...), nil
}

// entriesKey is a multiset of ledger rows in a comparable form: each
// (bucket, amount) with its amount normalised, sorted.
func entriesKey(buckets, amounts []string) string {
	es := make([]string, len(buckets))
	for i := range buckets {
		a := amounts[i]
		if d, err := money.Parse(a); err == nil {
			a = d.String()
		}
		es[i] = buckets[i] + " " + a
	}
	sort.Strings(es)
	return strings.Join(es, ", ")
}

// compareIdentities reports every stored identity the model does not
// list, every listed one not stored, and every one whose outcome or
// ledger rows differ from the model's.
func (s *checker) compareIdentities(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	type want struct {
		outcome, entries string
		seen             bool
	}
	model := make(map[[4]string]*want, len(in.ExpectedIdentities))
	for _, e := range in.ExpectedIdentities {
		if in.TenantID != "" && e.TenantID != in.TenantID {
			continue
		}
		b, a := make([]string, len(e.Entries)), make([]string, len(e.Entries))
		for i, en := range e.Entries {
			b[i], a[i] = en.Bucket, en.Amount
		}
		model[[4]string{e.TenantID, e.Period, e.RecordID, e.Operation}] = &want{outcome: e.Outcome, entries: entriesKey(b, a)}
	}
	rows, err := db.On(tx).ReconcileIdentityEffects(ctx, in.TenantID)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, r := range rows {
		f := Finding{TenantID: r.TenantID, Period: r.AccountPeriod, RecordID: r.RecordID, Operation: r.Operation}
		name := f.TenantID + "/" + f.Period + "/" + f.RecordID + "/" + f.Operation
		got := entriesKey(r.Buckets, r.Amounts)
		w, ok := model[[4]string{f.TenantID, f.Period, f.RecordID, f.Operation}]
		switch {
		case !ok:
			f.Class, f.Detail = ClassIdentityNotExpected, fmt.Sprintf("identity %s (%s, rows [%s]) is not in the model", name, r.Outcome, got)
		case w.seen:
			continue // stored twice: checkIdentityDuplicates reports it
		case r.Outcome != w.outcome || got != w.entries:
			w.seen = true
			f.Class, f.Detail = ClassIdentityModelMismatch, fmt.Sprintf("identity %s: %s with rows [%s]; the model has %s with rows [%s]", name, r.Outcome, got, w.outcome, w.entries)
		default:
			w.seen = true
			continue
		}
		out = append(out, f)
	}
	var missing []Finding
	for k, w := range model {
		if !w.seen {
			missing = append(missing, Finding{Class: ClassIdentityExpectedMissing, TenantID: k[0], Period: k[1], RecordID: k[2], Operation: k[3],
				Detail: fmt.Sprintf("identity %s is in the model (%s with rows [%s]) but not stored", strings.Join(k[:], "/"), w.outcome, w.entries)})
		}
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i].Detail < missing[j].Detail })
	return append(out, missing...), nil
}

// compareOutcomes compares the delivery rows by outcome with the model's.
func (s *checker) compareOutcomes(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	rows, err := db.On(tx).ReconcileDeliveryOutcomes(ctx, in.SourceTopic)
	if err != nil {
		return nil, err
	}
	got := make(map[string]int64, len(rows))
	for _, r := range rows {
		got[r.Outcome] = r.Deliveries
	}
	names := map[string]bool{}
	for o := range got {
		names[o] = true
	}
	for o := range in.ExpectedOutcomes {
		names[o] = true
	}
	sorted := make([]string, 0, len(names))
	for o := range names {
		sorted = append(sorted, o)
	}
	sort.Strings(sorted)
	var out []Finding
	for _, o := range sorted {
		if got[o] != in.ExpectedOutcomes[o] {
			out = append(out, Finding{Class: ClassOutcomesModelMismatch,
				Detail: fmt.Sprintf("%d delivery rows %s, the model has %d", got[o], o, in.ExpectedOutcomes[o])})
		}
	}
	return out, nil
}

// compareKeyAnswers finds the Idempotency-Keys whose clients got another
// answer than the one stored, or that are not done.
func (s *checker) compareKeyAnswers(ctx context.Context, tx pgx.Tx, in Input) ([]Finding, error) {
	var p db.ReconcileKeyAnswersParams
	for k := range in.KeyAnswers {
		p.TenantID, p.Key = append(p.TenantID, k.TenantID), append(p.Key, k.Key)
	}
	rows, err := db.On(tx).ReconcileKeyAnswers(ctx, p)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, r := range rows {
		k := KeyRef{pgq.Deref(r.TenantID), pgq.Deref(r.Key)}
		switch want := in.KeyAnswers[k]; {
		case r.Status != "done":
			out = append(out, Finding{Class: ClassKeyAnswerMismatch, TenantID: k.TenantID,
				Detail: fmt.Sprintf("key %s: status %q, its clients were answered %d bytes", k.Key, r.Status, len(want))})
		case !bytes.Equal(r.Response, want):
			out = append(out, Finding{Class: ClassKeyAnswerMismatch, TenantID: k.TenantID,
				Detail: fmt.Sprintf("key %s: stored %q, its clients were answered %q", k.Key, r.Response, want)})
		}
	}
	return out, nil
}
