package settle

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/settlehq/settle/corrections"
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/message"
)

const (
	bucketBalance = "balance"
	bucketHeld    = "held"
)

// effect is what apply decided for a new identity.
type effect struct {
	resp     *message.Response
	a        *account // the account it settled on, if any
	rootID   int64
	targetID int64
	wait     *recKey // not nil: the target has not settled yet
}

// apply decides the effect of a record whose identity is new (id is the id
// its identity row will get), against the locked state, and stages its
// ledger rows and the changes to chains, holds and accounts.
func (st *txState) apply(ctx context.Context, d *decoded, id int64) (*effect, error) {
	r := &d.rec
	switch r.Kind {
	case record.KindGrant:
		a := st.accounts[accountKey{r.TenantID, r.Subject, r.Currency}]
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
	return nil, fmt.Errorf("%s: unknown kind %q", d.id, r.Kind)
}

// resolved is the result of looking up an operation's target.
type resolved int

const (
	targetMissing resolved = iota // not settled yet: wait
	targetFound
	targetInvalid // wrong kind, or candidates in more than one chain
)

// resolveChain finds the chain a correction, reversal, refund or reclaim
// names: a usage, correction or reversal with that record_id (refused ones
// count, quarantined ones do not).
func (st *txState) resolveChain(k recKey) (*chain, resolved) {
	var root int64
	for _, id := range st.byRecord[k] {
		if id.outcome == message.OutcomeQuarantined {
			continue
		}
		switch id.key.Operation {
		case record.KindUsage, record.KindCorrection, record.KindReversal:
			if id.rootID == 0 || (root != 0 && root != id.rootID) {
				return nil, targetInvalid
			}
			root = id.rootID
		default:
			return nil, targetInvalid
		}
	}
	if root == 0 {
		return nil, targetMissing
	}
	ch := st.chains[root]
	if ch == nil {
		panic(fmt.Sprintf("settle: chain %d of %v not locked", root, k))
	}
	return ch, targetFound
}

// resolveHold finds the hold a capture or release names. The *identity is
// the hold's (settled or refused); the *hold is nil for a refused hold.
func (st *txState) resolveHold(k recKey) (*identity, *hold, resolved) {
	var found *identity
	for _, id := range st.byRecord[k] {
		if id.outcome == message.OutcomeQuarantined {
			continue
		}
		if id.key.Operation != record.KindHold {
			return nil, nil, targetInvalid
		}
		found = id
	}
	if found == nil {
		return nil, nil, targetMissing
	}
	return found, st.holds[found.id], targetFound
}

func (st *txState) waitFor(k recKey) (*effect, error) { return &effect{wait: &k}, nil }

func (st *txState) invalidLink(ctx context.Context, d *decoded, detail string) (*effect, error) {
	resp, err := st.quarantine(ctx, d, message.ReasonInvalidLink, detail)
	return &effect{resp: resp}, err
}

func (st *txState) applyUsage(ctx context.Context, d *decoded, id int64) (*effect, error) {
	r := &d.rec
	a := st.accounts[accountKey{r.TenantID, r.Subject, r.Currency}]
	entries := []message.Entry{{Bucket: bucketBalance, Amount: money.MustParse(r.Amount).Neg().String()}}
	var links *message.Links
	var targetID int64
	if r.HoldID != "" {
		hid, h, early, err := st.linkedHold(ctx, d, "hold_id "+r.HoldID+" names a record that is not a hold")
		if hid == nil {
			return early, err
		}
		if hid.subject != r.Subject || hid.currency != r.Currency {
			return st.invalidLink(ctx, d, fmt.Sprintf("hold %s is for %s in %s, the usage for %s in %s", r.HoldID, hid.subject, hid.currency, r.Subject, r.Currency))
		}
		targetID = hid.id
		links = &message.Links{Hold: hid.settlementID}
		if h != nil && h.status == "active" {
			if err := st.expireIfDue(ctx, h); err != nil {
				return nil, err
			}
		}
		if h != nil && h.status == "active" {
			// Capture: the usage is charged in full and the hold's whole
			// remainder is released (what it covered is now charged).
			entries = append(entries, message.Entry{Bucket: bucketHeld, Amount: h.remaining.Neg().String()})
			h.status, h.remaining, h.closedBy, h.dirty = "captured", money.Dec{}, id, true
		}
	}
	eff := st.settled(d, id, a, links, entries...)
	eff.rootID, eff.targetID = id, targetID
	st.chains[id] = &chain{rootID: id, rootSubject: r.Subject, rootCurrency: r.Currency, rootSettlement: eff.resp.SettlementID,
		a: a, c: corrections.Chain{NetCharge: money.MustParse(r.Amount), Version: r.FinalizationVersion}, isNew: true}
	return eff, nil
}

// linkedChain resolves the chain a correction, reversal, refund or reclaim
// names. When there is none to act on it returns, instead of a chain, the
// effect to answer with: wait for the target, or quarantine invalid_link.
func (st *txState) linkedChain(ctx context.Context, d *decoded) (*chain, *effect, error) {
	k, _ := target(&d.rec)
	ch, res := st.resolveChain(k)
	switch res {
	case targetMissing:
		eff, err := st.waitFor(k)
		return nil, eff, err
	case targetInvalid:
		eff, err := st.invalidLink(ctx, d, fmt.Sprintf("record %s of period %s is not a usage, correction or reversal of one chain", k.record, k.period))
		return nil, eff, err
	}
	return ch, nil, nil
}

// linkedHold resolves the hold a capture or release names. When there is
// none to act on it returns, instead of the hold's identity, the effect to
// answer with: wait for the target, or quarantine invalid_link saying
// notAHold.
func (st *txState) linkedHold(ctx context.Context, d *decoded, notAHold string) (*identity, *hold, *effect, error) {
	k, _ := target(&d.rec)
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

func (st *txState) applyCorrection(ctx context.Context, d *decoded, id int64) (*effect, error) {
	r := &d.rec
	ch, early, err := st.linkedChain(ctx, d)
	if ch == nil {
		return early, err
	}
	if r.Subject != ch.rootSubject || (r.Kind == record.KindCorrection && r.Currency != ch.rootCurrency) {
		return st.invalidLink(ctx, d, fmt.Sprintf("the chain is for %s in %s, the %s for %s in %s", ch.rootSubject, ch.rootCurrency, r.Kind, r.Subject, r.Currency))
	}
	total := money.MustParse(r.Amount) // "" for a reversal: zero
	dec := corrections.Correct(ch.c, total, r.FinalizationVersion)
	if d.id.Operation == OperationResolution {
		// An analyst's statement takes no producer version.
		dec = corrections.Restate(ch.c, total)
	}
	switch dec.Verdict {
	case corrections.Refuse:
		return &effect{resp: st.refuse(d, dec.Reason, fmt.Sprintf("chain is at finalization_version %d", ch.c.Version)), rootID: ch.rootID}, nil
	case corrections.Quarantine:
		return st.quarantineEffect(ctx, d, dec.Reason, fmt.Sprintf("chain is at finalization_version %d", ch.c.Version))
	}
	ch.c, ch.dirty = dec.Next, true
	eff := st.settled(d, id, ch.a, &message.Links{Corrects: r.Corrects, Root: ch.rootSettlement}, message.Entry{Bucket: bucketBalance, Amount: dec.Delta.String()})
	eff.rootID = ch.rootID
	return eff, nil
}

func (st *txState) applyRefundOrReclaim(ctx context.Context, d *decoded, id int64) (*effect, error) {
	r := &d.rec
	ch, early, err := st.linkedChain(ctx, d)
	if ch == nil {
		return early, err
	}
	if r.Subject != ch.rootSubject {
		return st.invalidLink(ctx, d, fmt.Sprintf("the chain is for %s, the %s for %s", ch.rootSubject, r.Kind, r.Subject))
	}
	var dec corrections.Decision
	links := &message.Links{Root: ch.rootSettlement}
	if r.Kind == record.KindRefund {
		dec = corrections.RefundChain(ch.c)
	} else {
		dec = corrections.ReclaimChain(ch.c)
		links.RefundTarget = ch.refundSettlement
	}
	if dec.Verdict == corrections.Refuse {
		return &effect{resp: st.refuse(d, dec.Reason, ""), a: ch.a, targetID: ch.rootID}, nil
	}
	ch.c, ch.dirty = dec.Next, true
	switch {
	case r.Kind == record.KindRefund:
		ch.refundID, ch.refundSettlement = id, settlementID(d.id)
	default:
		ch.reclaimID = id
	}
	var entries []message.Entry
	if dec.WritesRow {
		entries = append(entries, message.Entry{Bucket: bucketBalance, Amount: dec.Delta.String()})
	}
	eff := st.settled(d, id, ch.a, links, entries...)
	eff.targetID = ch.rootID
	return eff, nil
}

func (st *txState) applyHold(ctx context.Context, d *decoded, id int64) (*effect, error) {
	r := &d.rec
	a := st.accounts[accountKey{r.TenantID, r.Subject, r.Currency}]
	if !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(st.now) {
		return &effect{resp: st.refuse(d, message.ReasonExpired, "expires_at "+r.ExpiresAt.Format(time.RFC3339Nano)+" has passed")}, nil
	}
	if err := st.expireDue(ctx, a); err != nil {
		return nil, err
	}
	amount := money.MustParse(r.Amount)
	available := a.balance.Sub(a.held)
	if amount.Cmp(available) > 0 {
		a.answered = true
		return &effect{resp: st.refuse(d, message.ReasonInsufficientFunds, "available "+available.String()+" "+r.Currency)}, nil
	}
	eff := st.settled(d, id, a, nil, message.Entry{Bucket: bucketHeld, Amount: r.Amount})
	var exp *time.Time
	if !r.ExpiresAt.IsZero() {
		t := r.ExpiresAt
		exp = &t
	}
	st.holds[id] = &hold{identityID: id, key: d.id, settlementID: eff.resp.SettlementID, tenant: r.TenantID, accountID: a.id, a: a, amount: amount, remaining: amount, expiresAt: exp,
		status: "active", isNew: true, dirty: true}
	return eff, nil
}

func (st *txState) applyHoldRelease(ctx context.Context, d *decoded, id int64) (*effect, error) {
	r := &d.rec
	hid, h, early, err := st.linkedHold(ctx, d, "record "+r.RecordID+" is not a hold")
	if hid == nil {
		return early, err
	}
	if hid.subject != r.Subject {
		return st.invalidLink(ctx, d, fmt.Sprintf("the hold is for %s, the release for %s", hid.subject, r.Subject))
	}
	links := &message.Links{Hold: hid.settlementID}
	var entries []message.Entry
	if h != nil && h.status == "active" {
		if err := st.expireIfDue(ctx, h); err != nil {
			return nil, err
		}
	}
	a := st.accountsByID[hid.accountID]
	if h != nil {
		a = h.a
		if h.status == "active" {
			entries = append(entries, message.Entry{Bucket: bucketHeld, Amount: h.remaining.Neg().String()})
			h.status, h.remaining, h.closedBy, h.dirty = "released", money.Dec{}, id, true
		}
	}
	eff := st.settled(d, id, a, links, entries...)
	eff.targetID = hid.id
	return eff, nil
}

// expireDue releases the account's active holds that expired by the
// transaction's time, before its available balance is looked at.
func (st *txState) expireDue(ctx context.Context, a *account) error {
	if a.expiredChecked {
		return nil
	}
	a.expiredChecked = true
	for _, h := range st.holds {
		if h.a == a && h.status == "active" {
			if err := st.expireIfDue(ctx, h); err != nil {
				return err
			}
		}
	}
	return nil
}

// expireIfDue releases an active hold whose expires_at has passed, as its
// own settlement (identity: the hold's, operation expire).
func (st *txState) expireIfDue(ctx context.Context, h *hold) error {
	if h.expiresAt == nil || h.expiresAt.After(st.now) {
		return nil
	}
	id, err := st.nextID(ctx)
	if err != nil {
		return err
	}
	key := record.Identity{TenantID: h.key.TenantID, AccountPeriod: h.key.AccountPeriod, RecordID: h.key.RecordID, Operation: record.KindExpire}
	rec := record.Record{TenantID: key.TenantID, AccountPeriod: key.AccountPeriod, RecordID: key.RecordID, Kind: record.KindExpire, Subject: h.a.key.subject, OccurredAt: *h.expiresAt}
	canonical := record.Canonical(&rec)
	d := &decoded{in: &Input{Topic: "", Partition: 0, Offset: 0}, id: key, canonical: canonical, fp: record.Sum(canonical), rec: rec}
	eff := st.settled(d, id, h.a, &message.Links{Hold: h.settlementID}, message.Entry{Bucket: bucketHeld, Amount: h.remaining.Neg().String()})
	eff.targetID = h.identityID
	h.status, h.remaining, h.closedBy, h.dirty = "expired", money.Dec{}, id, true
	st.claim(d, id, eff)
	return nil
}

// settled stages a settlement of d on account a that writes entries: the
// ledger rows, the account's new cached state and sequence. A settlement
// without entries (a success recorded, a release of nothing) moves nothing
// and takes no sequence number.
func (st *txState) settled(d *decoded, id int64, a *account, links *message.Links, entries ...message.Entry) *effect {
	if a == nil {
		if len(entries) > 0 {
			panic(fmt.Sprintf("settle: %s: account not locked", d.id))
		}
		// Nothing moves (a release of a refused hold): no account needed.
		resp := st.response(d, message.OutcomeSettled, "")
		resp.SettlementID, resp.Links = settlementID(d.id), links
		return &effect{resp: resp}
	}
	sid := settlementID(d.id)
	for _, e := range entries {
		amt := money.MustParse(e.Amount)
		switch e.Bucket {
		case bucketBalance:
			a.balance = a.balance.Add(amt)
		case bucketHeld:
			a.held = a.held.Add(amt)
		}
		a.head = message.ChainHash(a.head, a.key.tenant, a.key.subject, a.key.currency, sid, e.Bucket, amt.String())
		a.entryID++
		st.entries = append(st.entries, entryRow{id: a.entryID, identityID: id, accountID: a.id, tenant: a.key.tenant, bucket: e.Bucket, amount: amt, hash: a.head,
			seq: a.seq + 1, balance: a.balance, held: a.held})
	}
	if a.held.Sign() < 0 {
		if !a.kept {
			panic(fmt.Sprintf("settle: %s: held amount of account %d would be %s", d.id, a.id, a.held))
		}
		// The holds were read fresh beside a kept state that another
		// writer has moved past (it placed the hold released here): the
		// attempt is thrown away and the next reads the account.
		st.stale = fmt.Errorf("%s: held amount of account %d would be %s from its kept state: %w", d.id, a.id, a.held, errKeptStale)
	}
	resp := st.response(d, message.OutcomeSettled, "")
	resp.SettlementID = sid
	resp.Subject, resp.Currency = a.key.subject, a.key.currency
	resp.Entries, resp.Links = entries, links
	resp.BalanceAfter, resp.HeldAfter = a.balance.String(), a.held.String()
	if len(entries) > 0 {
		a.seq++
		resp.Sequence, resp.ChainHash = a.seq, hex.EncodeToString(a.head)
	} else {
		a.answered = true // the balance it reports is not fenced by a row
	}
	resp.Late = st.closed[[2]string{d.rec.TenantID, d.rec.AccountPeriod}]
	return &effect{resp: resp, a: a}
}

// response starts the stored response of d.
func (st *txState) response(d *decoded, outcome message.Outcome, reason string) *message.Response {
	occurred := d.rec.OccurredAt
	resp := &message.Response{
		Version:     message.SchemaVersionOutput,
		Outcome:     outcome,
		Reason:      reason,
		Identity:    message.IdentityOf(d.id),
		Kind:        string(d.rec.Kind),
		Subject:     d.rec.Subject,
		CommittedAt: st.now,
		OccurredAt:  &occurred,
	}
	if d.in.Topic != "" {
		source := d.in.coordinates()
		resp.SourceRecord = &source
	}
	return resp
}

// refuse returns a stored refusal: no effect, and every retry gets it again.
func (st *txState) refuse(d *decoded, reason, detail string) *message.Response {
	resp := st.response(d, message.OutcomeRefused, reason)
	resp.Detail = detail
	return resp
}

func (st *txState) quarantineEffect(ctx context.Context, d *decoded, reason, detail string) (*effect, error) {
	resp, err := st.quarantine(ctx, d, reason, detail)
	return &effect{resp: resp}, err
}

// quarantine opens a rule-based case for a new identity and returns its
// stored response.
func (st *txState) quarantine(ctx context.Context, d *decoded, reason, detail string) (*message.Response, error) {
	caseID, err := st.openCase(ctx, d, reason, 0, nil, d.canonical, detail)
	if err != nil {
		return nil, err
	}
	resp := st.response(d, message.OutcomeQuarantined, reason)
	resp.Detail, resp.CaseID = detail, caseID
	return resp, nil
}
