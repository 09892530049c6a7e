package settle

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// handle decides the outcome of one input record against the state so far,
// as if the records before it in the batch had been settled one at a time.
func (st *txState) handle(ctx context.Context, d *decoded) (message.Result, error) {
	c := d.in.coordinates()
	st.advanceOffset(c)
	if r, ok := st.redeliveredAt(d, c); ok {
		r.Timestamp, r.Key = d.in.Timestamp, d.in.Key
		if r.Outcome == message.OutcomeWaiting && len(r.Response) == 0 {
			st.redeliveredWaiting(d, &r)
		}
		if r.Outcome == message.OutcomeWaiting {
			if w := st.waitingByID[d.id]; w != nil {
				st.waitingResult(w.target, r)
			}
		}
		return r, nil
	}
	res := message.Result{Version: message.SchemaVersionOutput, Source: c, Timestamp: d.in.Timestamp, Key: d.in.Key}
	switch {
	case d.in.Exhausted != nil:
		return st.deadLetter(d, res, message.ReasonTransientExhausted, "transient", d.in.Exhausted.Err), nil
	case d.err != nil:
		// An input that does not decode is dead-lettered: that is its
		// outcome, not a failure of the batch.
		return st.deadLetter(d, res, d.err.Reason, "invalid_input", d.err.Error()), nil //nolint:nilerr // see above
	}
	idj := message.IdentityOf(d.id)
	res.Identity = &idj

	if prior, ok := st.identities[d.id]; ok {
		return st.repeat(d, prior.id, prior.version, prior.canonical, prior.fp, prior.response, res)
	}
	if w, ok := st.waitingByID[d.id]; ok && w.status != "applied" {
		return st.repeat(d, 0, record.CanonicalVersion, w.canonical, w.fp, w.response, res)
	}
	r, err := st.process(ctx, d)
	if err != nil {
		return res, err
	}
	if r.wait != nil {
		r.Response = st.waitingResponse(d, *r.wait)
		w := &waitingOp{d: d, target: *r.wait, fp: d.fp, canonical: d.canonical, response: r.Response, status: "waiting", isNew: true, dirty: true}
		st.waitingByID[d.id] = w
		st.waitingByTarget[w.target] = append(st.waitingByTarget[w.target], w)
		st.waitingList = append(st.waitingList, w)
	}
	res.Outcome, res.Reason, res.CaseID, res.Response = r.Outcome, r.Reason, r.CaseID, r.Response
	if r.wait != nil {
		st.waitingResult(*r.wait, res)
	}
	if r.Outcome == message.OutcomeQuarantined {
		// A case's deliveries are listed by case (delivery_by_case.sql):
		// the one that opened it too.
		st.deliveries = append(st.deliveries, deliveryRow{in: d.in, tenant: d.id.TenantID, identityID: r.identityID,
			caseID: r.CaseID, outcome: r.Outcome, reason: r.Reason})
	}
	return res, nil
}

// redeliveredAt finds the result of an input record at c handled before:
// in a delivery row (a repeat, a quarantine, a dead letter: delivery_lookup),
// or, for a first delivery, on the identity it claimed or the waiting row
// it left, which carry its coordinates (no delivery row repeats them).
func (st *txState) redeliveredAt(d *decoded, c message.Coordinates) (message.Result, bool) {
	if r, ok := st.redelivered[c]; ok {
		return r, true
	}
	if d.err != nil || d.in.Exhausted != nil {
		return message.Result{}, false
	}
	r := message.Result{Version: message.SchemaVersionOutput, Source: c, Redelivered: true}
	if prior, ok := st.identities[d.id]; ok && !prior.isNew && prior.source == c {
		idj := message.IdentityOf(d.id)
		r.Identity, r.Outcome, r.Reason, r.Response = &idj, prior.outcome, prior.reason, prior.response
		r.CaseID = prior.caseID()
		return r, true
	}
	if w, ok := st.waitingByID[d.id]; ok && !w.isNew && w.d.in.coordinates() == c {
		// Completed by handle: still waiting, or orphaned.
		r.Outcome = message.OutcomeWaiting
		return r, true
	}
	return message.Result{}, false
}

// waitingResult sends the result of an input record that waits for target
// through the outbox, under an exclusive lock of the target's period: the
// final result can then only be written by a later transaction, so the
// relay publishes it after this one (callers of Settle do not publish
// waiting results themselves).
func (st *txState) waitingResult(target recKey, r message.Result) {
	st.need.add(recordLock(target.tenant, target.period, target.record), true)
	st.queueResult(r.Key, r)
}

// queueResult puts a result on the results topic through the outbox.
func (st *txState) queueResult(key []byte, r message.Result) {
	tenant := ""
	if r.Identity != nil {
		tenant = r.Identity.TenantID
	}
	st.outbox = append(st.outbox, outboxRow{topic: st.s.cfg.ResultsTopic, key: key, value: r.AppendJSON(nil), tenant: tenant,
		headers: db.EncodeHeaders([]record.Header{{Key: "version", Value: []byte(strconv.Itoa(message.SchemaVersionOutput))}})})
}

// processed is what process decided for a new identity.
type processed struct {
	Outcome    message.Outcome
	Reason     string
	CaseID     int64
	Response   []byte
	identityID int64
	wait       *recKey // waiting: the target it waits for
}

// process applies a record whose identity is new: it settles, is refused or
// quarantined (and claims its identity), or waits for its target. Settling a
// record that can be a target wakes the operations waiting for it.
func (st *txState) process(ctx context.Context, d *decoded) (processed, error) {
	id, err := st.nextID(ctx)
	if err != nil {
		return processed{}, err
	}
	eff, err := st.apply(ctx, d, id)
	if err != nil {
		return processed{}, err
	}
	if eff.wait != nil {
		// Not claimed: the caller registers a new waiting operation; one
		// that was already waiting simply keeps waiting.
		return processed{Outcome: message.OutcomeWaiting, wait: eff.wait}, nil
	}
	body := st.claim(d, id, eff)
	p := processed{Outcome: eff.resp.Outcome, Reason: eff.resp.Reason, CaseID: eff.resp.CaseID, Response: body, identityID: id}
	if eff.resp.Outcome != message.OutcomeQuarantined && canBeTarget(d.rec.Kind) {
		if err := st.wake(ctx, recKey{d.rec.TenantID, d.rec.AccountPeriod, d.rec.RecordID}); err != nil {
			return p, err
		}
	}
	return p, nil
}

// wake applies, in arrival order, the operations waiting for the record at
// key, now that a record with that key settled. One that still cannot find
// its target keeps waiting; one that finds a record of the wrong kind is
// quarantined invalid_link.
func (st *txState) wake(ctx context.Context, key recKey) error {
	for _, w := range st.waitingByTarget[key] {
		if w.status == "applied" {
			continue
		}
		if _, claimed := st.identities[w.d.id]; claimed {
			continue
		}
		p, err := st.process(ctx, w.d)
		if err != nil {
			return err
		}
		if p.Outcome == message.OutcomeWaiting {
			continue // its target is still not there (or not settled)
		}
		w.status, w.dirty = "applied", true
		if w.caseID != 0 {
			st.closedCases = append(st.closedCases, w.caseID) // an orphan case: auto_resolved
		}
		// The final result of the waiting input record, on the results topic.
		r := message.Result{Version: message.SchemaVersionOutput, Source: w.d.in.coordinates(),
			Outcome: p.Outcome, Reason: p.Reason, CaseID: p.CaseID, Response: p.Response}
		idj := message.IdentityOf(w.d.id)
		r.Identity = &idj
		st.queueResult(w.d.in.Key, r)
	}
	return nil
}

// redeliveredWaiting completes the answer to a redelivered record that
// waited (its delivery names no identity) with the result it has now: the
// identity's final outcome once its operation was applied, the orphan
// case once the sweep gave up on its target, else its waiting response.
func (st *txState) redeliveredWaiting(d *decoded, r *message.Result) {
	idj := message.IdentityOf(d.id)
	r.Identity = &idj
	if prior, ok := st.identities[d.id]; ok {
		r.Outcome, r.Reason, r.Response, r.CaseID = prior.outcome, prior.reason, prior.response, prior.caseID()
		return
	}
	if w, ok := st.waitingByID[d.id]; ok {
		if w.status == "orphaned" {
			r.Outcome, r.Reason, r.CaseID = message.OutcomeQuarantined, message.ReasonOrphan, w.caseID
			return
		}
		r.Response = w.response
	}
}

// caseID is the conflict case a quarantined identity's response names
// (0 for any other).
func (id *identity) caseID() int64 {
	if id.outcome != message.OutcomeQuarantined {
		return 0
	}
	var c struct {
		CaseID int64 `json:"case_id"`
	}
	_ = json.Unmarshal(id.response, &c)
	return c.CaseID
}

func (st *txState) waitingResponse(d *decoded, t recKey) []byte {
	resp := st.response(d, message.OutcomeWaiting, "")
	resp.Detail = "waiting for record " + t.record + " of period " + t.period
	return resp.AppendJSON(nil)
}

// repeat answers a record whose identity is already known (settled, or
// waiting when priorID is 0): the stored response when the canonical
// payloads match, compared in the stored record's canonical version; a
// quarantine case when they do not (opened after the batch is decided:
// openPendingCases).
func (st *txState) repeat(d *decoded, priorID int64, version int, canonical []byte, fp uint64, response []byte, res message.Result) (message.Result, error) {
	incoming := d.canonical
	if version != record.CanonicalVersion {
		var err error
		if incoming, err = record.CanonicalAt(version, &d.rec); err != nil {
			return res, fmt.Errorf("%s: canonical version %d: %w", d.id, version, err)
		}
	}
	same := string(incoming) == string(canonical)
	if version == record.CanonicalVersion && (d.fp == fp) != same {
		// The hash is a filter; the bytes decide. Equal bytes with
		// different hashes would be a defect in Sum.
		panic(fmt.Sprintf("settle: %s: fingerprint %x vs %x disagrees with canonical bytes", d.id, d.fp, fp))
	}
	if same {
		// Same identity, same fingerprint: a duplicate, also of a record
		// that still waits (its stored answer says so).
		res.Outcome, res.Replayed, res.Response = message.OutcomeDuplicate, true, response
		st.deliveries = append(st.deliveries, deliveryRow{in: d.in, tenant: d.id.TenantID, identityID: priorID, outcome: res.Outcome})
		return res, nil
	}
	// The case is opened with the batch's others once every record is
	// decided; its id goes on this delivery and result then.
	if err := st.deferMismatch(d, priorID, canonical, incoming); err != nil {
		return res, err
	}
	res.Outcome, res.Reason = message.OutcomeQuarantined, message.ReasonFingerprintMismatch
	st.deliveries = append(st.deliveries, deliveryRow{in: d.in, tenant: d.id.TenantID, identityID: priorID,
		outcome: message.OutcomeQuarantined, reason: message.ReasonFingerprintMismatch})
	return res, nil
}

// openCase opens (or joins) the conflict case of one record, now: its id
// goes into the response being decided. stored is the canonical payload it
// conflicts with, or nil for a rule-based quarantine.
func (st *txState) openCase(ctx context.Context, d *decoded, reason string, priorID int64, stored, incoming []byte, detail string) (int64, error) {
	c, err := caseOf(d, reason, priorID, stored, incoming, detail)
	if err != nil {
		return 0, err
	}
	ids, err := openCases(ctx, st.tx, []caseToOpen{c})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", d.id, err)
	}
	return ids[0], nil
}

// claim records a new identity with its stored response and returns the
// response bytes; a settlement that wrote ledger rows also goes to the
// settlements topic.
func (st *txState) claim(d *decoded, idNum int64, eff *effect) []byte {
	resp := eff.resp
	body := resp.AppendJSON(make([]byte, 0, 640))
	st.need.add(recordLock(d.id.TenantID, d.id.AccountPeriod, d.id.RecordID), false)
	id := &identity{
		id: idNum, key: d.id, fp: d.fp, version: record.CanonicalVersion, canonical: d.canonical,
		outcome: resp.Outcome, reason: resp.Reason, response: body, subject: d.rec.Subject, currency: d.rec.Currency,
		rootID: eff.rootID, targetID: eff.targetID, isNew: true, d: d,
	}
	if resp.Outcome == message.OutcomeSettled {
		id.settlementID = resp.SettlementID
	}
	if eff.a != nil {
		id.accountID, id.currency = eff.a.id, eff.a.key.currency
	}
	st.identities[d.id] = id
	if resp.Outcome != message.OutcomeQuarantined {
		st.index(id)
	}
	st.newIdentities = append(st.newIdentities, id)
	if resp.Outcome == message.OutcomeSettled && len(resp.Entries) > 0 {
		a := eff.a
		st.outbox = append(st.outbox, outboxRow{
			topic:    st.s.cfg.SettlementsTopic,
			key:      []byte(a.key.tenant + "/" + a.key.subject + "/" + a.key.currency),
			identity: id,
			// Only what the identity cannot give (settle/outbox assembles the rest).
			headers:  db.EncodeHeaders(traceHeaders(d.in.Headers)),
			sequence: resp.Sequence,
			kind:     string(resp.Kind),
			tenant:   a.key.tenant,
		})
	}
	return body
}

// deadLetter records an input record that cannot be settled.
func (st *txState) deadLetter(d *decoded, res message.Result, reason, class, msg string) message.Result {
	// The error is text (a column of its own): whatever of the record or
	// of an error it quotes, it must not be what keeps the record from its
	// dead letter.
	msg = strings.ToValidUTF8(strings.ReplaceAll(msg, "\x00", `\x00`), "\uFFFD")
	res.Outcome, res.Reason, res.Error = message.OutcomeDeadLettered, reason, msg
	attempts := 1
	if d.in.Exhausted != nil {
		attempts = d.in.Exhausted.Attempts
	}
	dl := deadLetterRow{in: d.in, reason: reason, class: class, err: msg, attempts: attempts}
	st.deadLetters = append(st.deadLetters, dl)
	// The message carries the original value only up to the limit: one
	// the broker refuses would never reach the topic. The dead_letters row
	// keeps every byte.
	value, truncated := d.in.Value, false
	if len(value) > st.s.cfg.DeadLetterValueBytesMax {
		value, truncated = []byte{}, true
	}
	st.outbox = append(st.outbox, outboxRow{topic: st.s.cfg.DeadLetterTopic, key: d.in.Key, value: nonNil(value), headers: dl.outboxHeaders(truncated)})
	return res
}
