package settle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/settlehq/settle/corrections"
	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/state"
	"github.com/settlehq/settle/settle/message"
)

const (
	bucketBalance = "balance"
	bucketHeld    = "held"
)

// OperationResolution is the operation of the identity an accepted case
// settles as: (tenant, period, case id, resolution).
const OperationResolution record.Kind = "resolution"

// apply decides the effect of a record whose identity is new (id is the id
// its identity row will get), against the locked state, and stages its
// ledger rows and the changes to chains, holds and accounts.
func (st *txState) apply(ctx context.Context, d *state.Item, id int64) (*effect, error) {
	r := &d.Rec
	switch r.Kind {
	case record.KindGrant:
		a := st.Accounts[state.AccountKey{Tenant: r.TenantID, Subject: r.Subject, Currency: r.Currency}]
		return st.settled(d, id, a, nil, message.Entry{Bucket: bucketBalance, Amount: r.Amount}), nil
	case record.KindUsage:
		return st.applyUsage(ctx, d, id)
	case record.KindCorrection, record.KindReversal:
		return st.applyCorrection(ctx, d, id)
	case record.KindRefund, record.KindReclaim:
		return st.applyRefundOrReclaim(ctx, d, id)
	case record.KindHold:
		return st.applyHold(ctx, d, id)
	case record.KindHoldRelease:
		return st.applyHoldRelease(ctx, d, id)
	}
	return nil, fmt.Errorf("%s: unknown kind %q", d.ID, r.Kind)
}

// resolved is the result of looking up an operation's target.
type resolved = corrections.Target

const (
	targetMissing = corrections.TargetMissing // not settled yet: wait
	targetFound   = corrections.TargetFound
	targetInvalid = corrections.TargetInvalid // wrong kind, or candidates in more than one chain
)

// resolveChain finds the chain a correction, reversal, refund or reclaim
// names, by corrections.ChainTarget over the records with that record_id
// (refused ones count, quarantined ones do not).
func (st *txState) resolveChain(k state.RecKey) (*state.Chain, resolved) {
	var t corrections.ChainTarget
	for _, id := range st.ByRecord[k] {
		if id.Outcome != message.OutcomeQuarantined {
			t.Add(id.Key.Operation, id.RootID)
		}
	}
	root, res := t.Resolve()
	if res != targetFound {
		return nil, res
	}
	ch := st.Chains[root]
	if ch == nil {
		panic(fmt.Sprintf("settle: chain %d of %v not locked", root, k))
	}
	return ch, targetFound
}

// resolveHold finds the hold a capture or release names. The *identity is
// the hold's (settled or refused); the *hold is nil for a refused hold.
func (st *txState) resolveHold(k state.RecKey) (*state.IdentityRow, *state.Hold, resolved) {
	var found *state.IdentityRow
	for _, id := range st.ByRecord[k] {
		if id.Outcome == message.OutcomeQuarantined {
			continue
		}
		if id.Key.Operation != record.KindHold {
			return nil, nil, targetInvalid
		}
		found = id
	}
	if found == nil {
		return nil, nil, targetMissing
	}
	return found, st.Holds[found.ID], targetFound
}

func (st *txState) waitFor(k state.RecKey) (*effect, error) { return &effect{wait: &k}, nil }

func (st *txState) invalidLink(ctx context.Context, d *state.Item, detail string) (*effect, error) {
	resp, err := st.quarantine(ctx, d, message.ReasonInvalidLink, detail)
	return &effect{resp: resp}, err
}

func (st *txState) applyUsage(ctx context.Context, d *state.Item, id int64) (*effect, error) {
	r := &d.Rec
	a := st.Accounts[state.AccountKey{Tenant: r.TenantID, Subject: r.Subject, Currency: r.Currency}]
	entries := []message.Entry{{Bucket: bucketBalance, Amount: money.MustParse(r.Amount).Neg().String()}}
	var links *message.Links
	var targetID int64
	if r.HoldID != "" {
		hid, h, early, err := st.linkedHold(ctx, d, "hold_id "+r.HoldID+" names a record that is not a hold")
		if hid == nil {
			return early, err
		}
		if hid.Subject != r.Subject || hid.Currency != r.Currency {
			return st.invalidLink(ctx, d, fmt.Sprintf("hold %s is for %s in %s, the usage for %s in %s", r.HoldID, hid.Subject, hid.Currency, r.Subject, r.Currency))
		}
		targetID = hid.ID
		links = &message.Links{Hold: hid.SettlementID}
		if h != nil && h.Status == "active" {
			if err := st.expireIfDue(ctx, h); err != nil {
				return nil, err
			}
		}
		if h != nil && h.Status == "active" {
			// Capture: the usage is charged in full and the hold's whole
			// remainder is released (what it covered is now charged).
			entries = append(entries, message.Entry{Bucket: bucketHeld, Amount: h.Remaining.Neg().String()})
			h.Status, h.Remaining, h.ClosedBy, h.Dirty = "captured", money.Dec{}, id, true
		}
	}
	eff := st.settled(d, id, a, links, entries...)
	eff.rootID, eff.targetID = id, targetID
	st.Chains[id] = &state.Chain{RootID: id, RootSubject: r.Subject, RootCurrency: r.Currency, RootSettlement: eff.resp.SettlementID,
		Account: a, Rules: corrections.Chain{NetCharge: money.MustParse(r.Amount), Version: r.FinalizationVersion}, IsNew: true}
	return eff, nil
}

// linkedChain resolves the chain a correction, reversal, refund or reclaim
// names. When there is none to act on it returns, instead of a chain, the
// effect to answer with: wait for the target, or quarantine invalid_link.
func (st *txState) linkedChain(ctx context.Context, d *state.Item) (*state.Chain, *effect, error) {
	k, _ := state.Target(&d.Rec)
	ch, res := st.resolveChain(k)
	switch res {
	case targetMissing:
		eff, err := st.waitFor(k)
		return nil, eff, err
	case targetInvalid:
		eff, err := st.invalidLink(ctx, d, fmt.Sprintf("record %s of period %s is not a usage, correction or reversal of one chain", k.Record, k.Period))
		return nil, eff, err
	}
	return ch, nil, nil
}

// linkedHold resolves the hold a capture or release names. When there is
// none to act on it returns, instead of the hold's identity, the effect to
// answer with: wait for the target, or quarantine invalid_link saying
// notAHold.
func (st *txState) linkedHold(ctx context.Context, d *state.Item, notAHold string) (*state.IdentityRow, *state.Hold, *effect, error) {
	k, _ := state.Target(&d.Rec)
	hid, h, res := st.resolveHold(k)
	switch res {
	case targetMissing:
		eff, err := st.waitFor(k)
		return nil, nil, eff, err
	case targetInvalid:
		eff, err := st.invalidLink(ctx, d, notAHold)
		return nil, nil, eff, err
	}
	return hid, h, nil, nil
}

func (st *txState) applyCorrection(ctx context.Context, d *state.Item, id int64) (*effect, error) {
	r := &d.Rec
	ch, early, err := st.linkedChain(ctx, d)
	if ch == nil {
		return early, err
	}
	if r.Subject != ch.RootSubject || (r.Kind == record.KindCorrection && r.Currency != ch.RootCurrency) {
		return st.invalidLink(ctx, d, fmt.Sprintf("the chain is for %s in %s, the %s for %s in %s", ch.RootSubject, ch.RootCurrency, r.Kind, r.Subject, r.Currency))
	}
	total := money.MustParse(r.Amount) // "" for a reversal: zero
	dec := corrections.Correct(ch.Rules, total, r.FinalizationVersion)
	if d.ID.Operation == OperationResolution {
		// An analyst's statement takes no producer version.
		dec = corrections.Restate(ch.Rules, total)
	}
	switch dec.Verdict {
	case corrections.Refuse:
		return &effect{resp: st.refuse(d, dec.Reason, fmt.Sprintf("chain is at finalization_version %d", ch.Rules.Version)), rootID: ch.RootID}, nil
	case corrections.Quarantine:
		return st.quarantineEffect(ctx, d, dec.Reason, fmt.Sprintf("chain is at finalization_version %d", ch.Rules.Version))
	}
	ch.Rules, ch.Dirty = dec.Next, true
	eff := st.settled(d, id, ch.Account, &message.Links{Corrects: r.Corrects, Root: ch.RootSettlement}, message.Entry{Bucket: bucketBalance, Amount: dec.Delta.String()})
	eff.rootID = ch.RootID
	return eff, nil
}

func (st *txState) applyRefundOrReclaim(ctx context.Context, d *state.Item, id int64) (*effect, error) {
	r := &d.Rec
	ch, early, err := st.linkedChain(ctx, d)
	if ch == nil {
		return early, err
	}
	if r.Subject != ch.RootSubject {
		return st.invalidLink(ctx, d, fmt.Sprintf("the chain is for %s, the %s for %s", ch.RootSubject, r.Kind, r.Subject))
	}
	var dec corrections.Decision
	links := &message.Links{Root: ch.RootSettlement}
	if r.Kind == record.KindRefund {
		dec = corrections.RefundChain(ch.Rules)
	} else {
		dec = corrections.ReclaimChain(ch.Rules)
		links.RefundTarget = ch.RefundSettlement
	}
	if dec.Verdict == corrections.Refuse {
		return &effect{resp: st.refuse(d, dec.Reason, ""), a: ch.Account, targetID: ch.RootID}, nil
	}
	ch.Rules, ch.Dirty = dec.Next, true
	switch {
	case r.Kind == record.KindRefund:
		ch.RefundID, ch.RefundSettlement = id, settlementID(d.ID)
	default:
		ch.ReclaimID = id
	}
	var entries []message.Entry
	if dec.WritesRow {
		entries = append(entries, message.Entry{Bucket: bucketBalance, Amount: dec.Delta.String()})
	}
	eff := st.settled(d, id, ch.Account, links, entries...)
	eff.targetID = ch.RootID
	return eff, nil
}

func (st *txState) applyHold(ctx context.Context, d *state.Item, id int64) (*effect, error) {
	r := &d.Rec
	a := st.Accounts[state.AccountKey{Tenant: r.TenantID, Subject: r.Subject, Currency: r.Currency}]
	if !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(st.Now) {
		return &effect{resp: st.refuse(d, message.ReasonExpired, "expires_at "+r.ExpiresAt.Format(time.RFC3339Nano)+" has passed")}, nil
	}
	if err := st.expireDue(ctx, a); err != nil {
		return nil, err
	}
	amount := money.MustParse(r.Amount)
	available := a.Balance.Sub(a.Held)
	if amount.Cmp(available) > 0 {
		a.Answered = true
		return &effect{resp: st.refuse(d, message.ReasonInsufficientFunds, "available "+available.String()+" "+r.Currency)}, nil
	}
	eff := st.settled(d, id, a, nil, message.Entry{Bucket: bucketHeld, Amount: r.Amount})
	var exp *time.Time
	if !r.ExpiresAt.IsZero() {
		t := r.ExpiresAt
		exp = &t
	}
	st.Holds[id] = &state.Hold{IdentityID: id, Key: d.ID, SettlementID: eff.resp.SettlementID, Tenant: r.TenantID, AccountID: a.ID, Account: a, Amount: amount, Remaining: amount, ExpiresAt: exp,
		Status: "active", IsNew: true, Dirty: true}
	return eff, nil
}

func (st *txState) applyHoldRelease(ctx context.Context, d *state.Item, id int64) (*effect, error) {
	r := &d.Rec
	hid, h, early, err := st.linkedHold(ctx, d, "record "+r.RecordID+" is not a hold")
	if hid == nil {
		return early, err
	}
	if hid.Subject != r.Subject {
		return st.invalidLink(ctx, d, fmt.Sprintf("the hold is for %s, the release for %s", hid.Subject, r.Subject))
	}
	links := &message.Links{Hold: hid.SettlementID}
	var entries []message.Entry
	if h != nil && h.Status == "active" {
		if err := st.expireIfDue(ctx, h); err != nil {
			return nil, err
		}
	}
	a := st.AccountsByID[hid.AccountID]
	if h != nil {
		a = h.Account
		if h.Status == "active" {
			entries = append(entries, message.Entry{Bucket: bucketHeld, Amount: h.Remaining.Neg().String()})
			h.Status, h.Remaining, h.ClosedBy, h.Dirty = "released", money.Dec{}, id, true
		}
	}
	eff := st.settled(d, id, a, links, entries...)
	eff.targetID = hid.ID
	return eff, nil
}

// expireDue releases the account's active holds that expired by the
// transaction's time, before its available balance is looked at.
func (st *txState) expireDue(ctx context.Context, a *state.Account) error {
	if a.ExpiredChecked {
		return nil
	}
	a.ExpiredChecked = true
	for _, h := range st.Holds {
		if h.Account == a && h.Status == "active" {
			if err := st.expireIfDue(ctx, h); err != nil {
				return err
			}
		}
	}
	return nil
}

// expireIfDue releases an active hold whose expires_at has passed, as its
// own settlement (identity: the hold's, operation expire).
func (st *txState) expireIfDue(ctx context.Context, h *state.Hold) error {
	if h.ExpiresAt == nil || h.ExpiresAt.After(st.Now) {
		return nil
	}
	id, err := st.NextID(ctx)
	if err != nil {
		return err
	}
	key := record.Identity{TenantID: h.Key.TenantID, AccountPeriod: h.Key.AccountPeriod, RecordID: h.Key.RecordID, Operation: record.KindExpire}
	rec := record.Record{TenantID: key.TenantID, AccountPeriod: key.AccountPeriod, RecordID: key.RecordID, Kind: record.KindExpire, Subject: h.Account.Key.Subject, OccurredAt: *h.ExpiresAt}
	canonical := fingerprint.Canonical(&rec)
	d := &state.Item{In: &message.Input{Topic: "", Partition: 0, Offset: 0}, ID: key, Canonical: canonical, FP: fingerprint.Sum(canonical), Rec: rec}
	eff := st.settled(d, id, h.Account, &message.Links{Hold: h.SettlementID}, message.Entry{Bucket: bucketHeld, Amount: h.Remaining.Neg().String()})
	eff.targetID = h.IdentityID
	h.Status, h.Remaining, h.ClosedBy, h.Dirty = "expired", money.Dec{}, id, true
	st.claim(d, id, eff)
	return nil
}

// settled stages a settlement of d on account a that writes entries: the
// ledger rows, the account's new cached state and sequence. A settlement
// without entries (a success recorded, a release of nothing) moves nothing
// and takes no sequence number.
func (st *txState) settled(d *state.Item, id int64, a *state.Account, links *message.Links, entries ...message.Entry) *effect {
	if a == nil {
		if len(entries) > 0 {
			panic(fmt.Sprintf("settle: %s: account not locked", d.ID))
		}
		// Nothing moves (a release of a refused hold): no account needed.
		resp := st.response(d, message.OutcomeSettled, "")
		resp.SettlementID, resp.Links = settlementID(d.ID), links
		return &effect{resp: resp}
	}
	sid := settlementID(d.ID)
	for _, e := range entries {
		amt := money.MustParse(e.Amount)
		switch e.Bucket {
		case bucketBalance:
			a.Balance = a.Balance.Add(amt)
		case bucketHeld:
			a.Held = a.Held.Add(amt)
		}
		a.Head = message.ChainHash(a.Head, a.Key.Tenant, a.Key.Subject, a.Key.Currency, sid, e.Bucket, amt.String())
		a.EntryID++
		st.Entries = append(st.Entries, state.EntryRow{ID: a.EntryID, IdentityID: id, AccountID: a.ID, Tenant: a.Key.Tenant, Bucket: e.Bucket, Amount: amt, Hash: a.Head,
			Seq: a.Seq + 1, Balance: a.Balance, Held: a.Held})
	}
	if a.Held.Sign() < 0 {
		if !a.Kept {
			panic(fmt.Sprintf("settle: %s: held amount of account %d would be %s", d.ID, a.ID, a.Held))
		}
		// The holds were read fresh beside a kept state that another
		// writer has moved past (it placed the hold released here): the
		// attempt is thrown away and the next reads the account.
		st.Stale = fmt.Errorf("%s: held amount of account %d would be %s from its kept state: %w", d.ID, a.ID, a.Held, state.ErrKeptStale)
	}
	resp := st.response(d, message.OutcomeSettled, "")
	resp.SettlementID = sid
	resp.Subject, resp.Currency = a.Key.Subject, a.Key.Currency
	resp.Entries, resp.Links = entries, links
	resp.BalanceAfter, resp.HeldAfter = a.Balance.String(), a.Held.String()
	if len(entries) > 0 {
		a.Seq++
		resp.Sequence, resp.ChainHash = a.Seq, hex.EncodeToString(a.Head)
	} else {
		a.Answered = true // the balance it reports is not fenced by a row
	}
	resp.Late = st.Closed[[2]string{d.Rec.TenantID, d.Rec.AccountPeriod}]
	return &effect{resp: resp, a: a}
}

// response starts the stored response of d.
func (st *txState) response(d *state.Item, outcome message.Outcome, reason string) *message.Response {
	occurred := d.Rec.OccurredAt
	resp := &message.Response{
		Version:     message.SchemaVersionOutput,
		Outcome:     outcome,
		Reason:      reason,
		Identity:    message.IdentityOf(d.ID),
		Kind:        string(d.Rec.Kind),
		Subject:     d.Rec.Subject,
		CommittedAt: st.Now,
		OccurredAt:  &occurred,
	}
	if d.In.Topic != "" {
		source := d.In.Coordinates()
		resp.SourceRecord = &source
	}
	return resp
}

// refuse returns a stored refusal: no effect, and every retry gets it again.
func (st *txState) refuse(d *state.Item, reason, detail string) *message.Response {
	resp := st.response(d, message.OutcomeRefused, reason)
	resp.Detail = detail
	return resp
}

func (st *txState) quarantineEffect(ctx context.Context, d *state.Item, reason, detail string) (*effect, error) {
	resp, err := st.quarantine(ctx, d, reason, detail)
	return &effect{resp: resp}, err
}

// quarantine opens a rule-based case for a new identity and returns its
// stored response.
func (st *txState) quarantine(ctx context.Context, d *state.Item, reason, detail string) (*message.Response, error) {
	caseID, err := st.openCase(ctx, d, reason, 0, nil, d.Canonical, detail)
	if err != nil {
		return nil, err
	}
	resp := st.response(d, message.OutcomeQuarantined, reason)
	resp.Detail, resp.CaseID = detail, caseID
	return resp, nil
}

// settlementID derives the settlement id from the identity, so that every
// redelivery and every environment names a settlement the same way.
func settlementID(id record.Identity) string {
	h := sha256.New()
	for _, s := range []string{id.TenantID, id.AccountPeriod, id.RecordID, string(id.Operation)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
