package settle

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/state"
	"github.com/settlehq/settle/settle/message"
)

// handle decides the outcome of one input record against the state so far,
// as if the records before it in the batch had been settled one at a time.
func (st *txState) handle(ctx context.Context, d *state.Item) (message.Result, error) {
	c := d.In.Coordinates()
	st.AdvanceOffset(c)
	if d.In.Batch != nil { // one input for the whole batch: the partition moves past it
		st.AdvanceOffsetTo(c, d.In.Batch.NextOffset)
	}
	if r, ok := st.redeliveredAt(d, c); ok {
		r.Timestamp, r.Key = d.In.Timestamp, d.In.Key
		if r.Outcome == message.OutcomeWaiting && len(r.Response) == 0 {
			st.redeliveredWaiting(d, &r)
		}
		if r.Outcome == message.OutcomeWaiting {
			if w := st.WaitingByID[d.ID]; w != nil {
				st.waitingResult(w.Target, r)
			}
		}
		return r, nil
	}
	res := message.Result{Version: message.SchemaVersionOutput, Source: c, Timestamp: d.In.Timestamp, Key: d.In.Key}
	switch {
	case d.In.Exhausted != nil:
		return st.deadLetter(d, res, message.ReasonTransientExhausted, "transient", d.In.Exhausted.Err), nil
	case d.In.Batch != nil:
		return st.deadLetter(d, res, message.ReasonBatchTooLarge, "invalid_input", d.In.Batch.Err), nil
	case d.Err != nil:
		// An input that does not decode is dead-lettered: that is its
		// outcome, not a failure of the batch.
		return st.deadLetter(d, res, d.Err.Reason, "invalid_input", d.Err.Error()), nil //nolint:nilerr // see above
	}
	idj := message.IdentityOf(d.ID)
	res.Identity = &idj

	if prior, ok := st.Identities[d.ID]; ok {
		return st.repeat(d, prior.ID, prior.Version, prior.Canonical, prior.FP, prior.Response, res)
	}
	if w, ok := st.WaitingByID[d.ID]; ok && w.Status != "applied" {
		return st.repeat(d, 0, fingerprint.CanonicalVersion, w.Canonical, w.FP, w.Response, res)
	}
	r, err := st.process(ctx, d)
	if err != nil {
		return res, err
	}
	if r.wait != nil {
		r.Response = st.waitingResponse(d, *r.wait)
		w := &state.Waiting{Item: d, Target: *r.wait, FP: d.FP, Canonical: d.Canonical, Response: r.Response, Status: "waiting", IsNew: true, Dirty: true}
		st.WaitingByID[d.ID] = w
		st.WaitingByTarget[w.Target] = append(st.WaitingByTarget[w.Target], w)
		st.WaitingList = append(st.WaitingList, w)
	}
	res.Outcome, res.Reason, res.CaseID, res.Response, res.ResponseOf = r.Outcome, r.Reason, r.CaseID, r.Response, r.identityID
	if r.wait != nil {
		st.waitingResult(*r.wait, res)
	}
	if r.Outcome == message.OutcomeQuarantined {
		// A case's deliveries are listed by case (delivery_by_case.sql):
		// the one that opened it too.
		st.Deliveries = append(st.Deliveries, state.DeliveryRow{In: d.In, Tenant: d.ID.TenantID, IdentityID: r.identityID,
			CaseID: r.CaseID, Outcome: r.Outcome, Reason: r.Reason})
	}
	return res, nil
}

// redeliveredAt finds the result of an input record at c handled before:
// in a delivery row (a repeat, a quarantine, a dead letter: delivery_lookup),
// or, for a first delivery, on the identity it claimed or the waiting row
// it left, which carry its coordinates (no delivery row repeats them).
func (st *txState) redeliveredAt(d *state.Item, c message.Coordinates) (message.Result, bool) {
	if r, ok := st.Redelivered[c]; ok {
		return r, true
	}
	if d.Err != nil || d.In.Undecoded() {
		return message.Result{}, false
	}
	r := message.Result{Version: message.SchemaVersionOutput, Source: c, Redelivered: true}
	if prior, ok := st.Identities[d.ID]; ok && !prior.IsNew && prior.Source == c {
		idj := message.IdentityOf(d.ID)
		r.Identity, r.Outcome, r.Reason, r.Response, r.ResponseOf = &idj, prior.Outcome, prior.Reason, prior.Response, prior.ID
		r.CaseID = prior.CaseID()
		return r, true
	}
	if w, ok := st.WaitingByID[d.ID]; ok && !w.IsNew && w.Item.In.Coordinates() == c {
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
func (st *txState) waitingResult(target state.RecKey, r message.Result) {
	st.Need.Add(state.RecordLock(target.Tenant, target.Period, target.Record), true)
	st.queueResult(r.Key, r)
}

// queueResult puts a result on the results topic through the outbox.
func (st *txState) queueResult(key []byte, r message.Result) {
	tenant := ""
	if r.Identity != nil {
		tenant = r.Identity.TenantID
	}
	st.Outbox = append(st.Outbox, state.OutboxRow{Topic: st.s.cfg.ResultsTopic, Key: key, Value: r.AppendJSON(nil), Tenant: tenant,
		Headers: pgq.EncodeHeaders([]record.Header{{Key: "version", Value: []byte(strconv.Itoa(message.SchemaVersionOutput))}})})
}

// processed is what process decided for a new identity.
type processed struct {
	Outcome    message.Outcome
	Reason     string
	CaseID     int64
	Response   []byte
	identityID int64
	wait       *state.RecKey // waiting: the target it waits for
}

// process applies a record whose identity is new: it settles, is refused or
// quarantined (and claims its identity), or waits for its target. Settling a
// record that can be a target wakes the operations waiting for it.
func (st *txState) process(ctx context.Context, d *state.Item) (processed, error) {
	id, err := st.NextID(ctx)
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
	if eff.resp.Outcome != message.OutcomeQuarantined && state.CanBeTarget(d.Rec.Kind) {
		if err := st.wake(ctx, state.RecKey{Tenant: d.Rec.TenantID, Period: d.Rec.AccountPeriod, Record: d.Rec.RecordID}); err != nil {
			return p, err
		}
	}
	return p, nil
}

// wake applies, in arrival order, the operations waiting for the record at
// key, now that a record with that key settled. One that still cannot find
// its target keeps waiting; one that finds a record of the wrong kind is
// quarantined invalid_link.
func (st *txState) wake(ctx context.Context, key state.RecKey) error {
	for _, w := range st.WaitingByTarget[key] {
		if w.Status == "applied" {
			continue
		}
		if _, claimed := st.Identities[w.Item.ID]; claimed {
			continue
		}
		p, err := st.process(ctx, w.Item)
		if err != nil {
			return err
		}
		if p.Outcome == message.OutcomeWaiting {
			continue // its target is still not there (or not settled)
		}
		w.Status, w.Dirty = "applied", true
		if w.CaseID != 0 {
			st.ClosedCases = append(st.ClosedCases, w.CaseID) // an orphan case: auto_resolved
		}
		// The final result of the waiting input record, on the results topic.
		r := message.Result{Version: message.SchemaVersionOutput, Source: w.Item.In.Coordinates(),
			Outcome: p.Outcome, Reason: p.Reason, CaseID: p.CaseID, Response: p.Response}
		idj := message.IdentityOf(w.Item.ID)
		r.Identity = &idj
		st.queueResult(w.Item.In.Key, r)
	}
	return nil
}

// redeliveredWaiting completes the answer to a redelivered record that
// waited (its delivery names no identity) with the result it has now: the
// identity's final outcome once its operation was applied, the orphan
// case once the sweep gave up on its target, else its waiting response.
func (st *txState) redeliveredWaiting(d *state.Item, r *message.Result) {
	idj := message.IdentityOf(d.ID)
	r.Identity = &idj
	if prior, ok := st.Identities[d.ID]; ok {
		r.Outcome, r.Reason, r.Response, r.CaseID, r.ResponseOf = prior.Outcome, prior.Reason, prior.Response, prior.CaseID(), prior.ID
		return
	}
	if w, ok := st.WaitingByID[d.ID]; ok {
		if w.Status == "orphaned" {
			r.Outcome, r.Reason, r.CaseID = message.OutcomeQuarantined, message.ReasonOrphan, w.CaseID
			return
		}
		r.Response = w.Response
	}
}

func (st *txState) waitingResponse(d *state.Item, t state.RecKey) []byte {
	resp := st.response(d, message.OutcomeWaiting, "")
	resp.Detail = "waiting for record " + t.Record + " of period " + t.Period
	return resp.AppendJSON(nil)
}

// repeat answers a record whose identity is already known (settled, or
// waiting when priorID is 0): the stored response when the canonical
// payloads match, compared in the stored record's canonical version; a
// quarantine case when they do not (opened after the batch is decided:
// openPendingCases).
func (st *txState) repeat(d *state.Item, priorID int64, version int, canonical []byte, fp uint64, response []byte, res message.Result) (message.Result, error) {
	incoming := d.Canonical
	if version != fingerprint.CanonicalVersion {
		var err error
		if incoming, err = fingerprint.CanonicalAt(version, &d.Rec); err != nil {
			return res, fmt.Errorf("%s: canonical version %d: %w", d.ID, version, err)
		}
	}
	same := string(incoming) == string(canonical)
	if version == fingerprint.CanonicalVersion && (d.FP == fp) != same {
		// The hash is a filter; the bytes decide. Equal bytes with
		// different hashes would be a defect in Sum.
		panic(fmt.Sprintf("settle: %s: fingerprint %x vs %x disagrees with canonical bytes", d.ID, d.FP, fp))
	}
	if same {
		// Same identity, same fingerprint: a duplicate, also of a record
		// that still waits (its stored answer says so).
		res.Outcome, res.Replayed, res.Response, res.ResponseOf = message.OutcomeDuplicate, true, response, priorID
		st.Deliveries = append(st.Deliveries, state.DeliveryRow{In: d.In, Tenant: d.ID.TenantID, IdentityID: priorID, Outcome: res.Outcome})
		return res, nil
	}
	// The case is opened with the batch's others once every record is
	// decided; its id goes on this delivery and result then.
	if err := st.deferMismatch(d, priorID, canonical, incoming); err != nil {
		return res, err
	}
	res.Outcome, res.Reason = message.OutcomeQuarantined, message.ReasonFingerprintMismatch
	st.Deliveries = append(st.Deliveries, state.DeliveryRow{In: d.In, Tenant: d.ID.TenantID, IdentityID: priorID,
		Outcome: message.OutcomeQuarantined, Reason: message.ReasonFingerprintMismatch})
	return res, nil
}

// deadLetter records an input record that cannot be settled.
func (st *txState) deadLetter(d *state.Item, res message.Result, reason, class, msg string) message.Result {
	// The error is text (a column of its own): whatever of the record or
	// of an error it quotes, it must not be what keeps the record from its
	// dead letter.
	msg = strings.ToValidUTF8(strings.ReplaceAll(msg, "\x00", `\x00`), "\uFFFD")
	res.Outcome, res.Reason, res.Error = message.OutcomeDeadLettered, reason, msg
	attempts := 1
	if d.In.Exhausted != nil {
		attempts = d.In.Exhausted.Attempts
	}
	// Whose it was, as far as it can be read: the decoded identity, or what
	// the bytes of a record that did not decode say. The letter is stored
	// under that tenant (a tenant's analysts see it) and the result names
	// what was read.
	id := d.LetterIdentity()
	if id != (record.Identity{}) {
		idj := message.IdentityOf(id)
		res.Identity = &idj
	}
	dl := state.DeadLetterRow{In: d.In, ID: id, Reason: reason, Class: class, Err: msg, Attempts: attempts}
	st.DeadLetters = append(st.DeadLetters, dl)
	// The message carries the original value only up to the limit: one
	// the broker refuses would never reach the topic. The dead_letters row
	// keeps every byte.
	value, truncated := d.In.Value, false
	if len(value) > st.s.cfg.DeadLetterValueBytesMax {
		value, truncated = []byte{}, true
	}
	st.Outbox = append(st.Outbox, state.OutboxRow{Topic: st.s.cfg.DeadLetterTopic, Key: d.In.Key, Value: state.NonNil(value), Headers: dl.OutboxHeaders(truncated)})
	return res
}
