package settle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/internal/state"
	"github.com/settlehq/settle/settle/message"
)

// ResolveRequest is an analyst's decision on a conflict case.
type ResolveRequest struct {
	CaseID   int64
	Decision string // "accept" or "reject"
	// Amount is the chain's new total an analyst states; "" takes the
	// incoming payload's amount (fingerprint_mismatch only).
	Amount string
	Reason string // why: required
	By     string // who: required
}

// Resolution is what a resolved case settled.
type Resolution struct {
	CaseID       int64           `json:"case_id"`
	Decision     string          `json:"decision"`
	Status       string          `json:"status"` // the case's status after
	SettlementID string          `json:"settlement_id,omitempty"`
	Response     json.RawMessage `json:"response,omitempty"`
	Replayed     bool            `json:"replayed,omitempty"` // already resolved: the stored resolution
}

// ErrCaseNotFound and ErrCaseClosed are returned by Resolve.
var (
	ErrCaseNotFound = errors.New("conflict case not found")
	ErrCaseClosed   = errors.New("conflict case is closed without a resolution (auto_resolved)")
)

// ResolveError is a request that cannot be carried out as asked; Reason
// says what to do instead.
type ResolveError struct{ Reason string }

func (e *ResolveError) Error() string { return "cannot resolve: " + e.Reason }

// Resolve rejects a case (no effect) or accepts it as a correction settled
// through the same core, as identity (tenant, period, case id, resolution),
// and gives the quarantined record its final result on the results topic.
// A second call for a resolved case returns the stored resolution
// (Replayed): a double submit settles once. Every resolution records who,
// when and why, and cannot be edited afterwards.
func (s *Store) Resolve(ctx context.Context, req ResolveRequest) (*Resolution, error) {
	switch {
	case req.Decision != "accept" && req.Decision != "reject":
		return nil, &ResolveError{fmt.Sprintf("decision %q: use accept or reject", req.Decision)}
	case req.Reason == "":
		return nil, &ResolveError{"a reason is required (--reason)"}
	case req.By == "":
		return nil, &ResolveError{"a name is required (--as)"}
	}
	if req.Amount != "" {
		n, err := record.NormalizeDecimal(req.Amount, 18, 9)
		if err != nil {
			return nil, &ResolveError{"amount: " + err.Error()}
		}
		req.Amount = n
	}
	var res *Resolution
	locks := state.PeriodLocks{}
	err := s.withRetries(ctx, 1, func(int) error {
		return s.transact(ctx, 1, s.now(), locks, "", false, func(st *txState) (bool, error) {
			var err error
			res, err = st.resolve(ctx, req)
			return err == nil && !res.Replayed, err
		})
	})
	// The caller's own mistakes come back as themselves, not as a failed
	// batch.
	var be *BatchError
	var re *ResolveError
	if errors.As(err, &be) && (errors.As(be.Err, &re) || errors.Is(be.Err, ErrCaseNotFound) || errors.Is(be.Err, ErrCaseClosed)) {
		return nil, be.Err
	}
	return res, err
}

// resolve decides req in st's transaction and queues its rows: the case's
// resolution, and for an accepted case the correction it settles.
func (st *txState) resolve(ctx context.Context, req ResolveRequest) (*Resolution, error) {
	c, err := db.On(st.Tx).ConflictCaseLock(ctx, req.CaseID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("case %d: %w", req.CaseID, ErrCaseNotFound)
	}
	if err != nil {
		return nil, err
	}
	key := record.Identity{TenantID: c.TenantID, AccountPeriod: c.AccountPeriod, RecordID: c.RecordID, Operation: record.Kind(c.Operation)}
	reason, incoming := c.Reason, c.IncomingCanonical
	src := message.Coordinates{Topic: c.Topic, Partition: c.Partition, Offset: c.Offset}
	if c.Decision != "" {
		return &Resolution{CaseID: req.CaseID, Decision: c.Decision, Status: c.Status, SettlementID: c.SettlementID, Response: c.Response, Replayed: true}, nil
	}
	switch c.Status {
	case "open":
	case "auto_resolved":
		return nil, fmt.Errorf("case %d: %w", req.CaseID, ErrCaseClosed)
	default:
		// Resolved by a concurrent submit that committed while this one
		// waited for the case's lock: the row lock shows its new status,
		// but this statement's snapshot predates its resolution row. The
		// next attempt reads it and answers with it.
		return nil, state.ErrLostRace
	}

	res := &Resolution{CaseID: req.CaseID, Decision: req.Decision, Status: state.ResolvedStatus(req.Decision)}
	var identityID int64
	final := message.Result{Version: message.SchemaVersionOutput, Source: src, CaseID: req.CaseID}
	idj := message.IdentityOf(key)
	final.Identity = &idj
	if req.Decision == "reject" {
		final.Outcome, final.Reason = message.OutcomeQuarantined, "rejected"
	} else {
		d, err := st.resolutionRecord(ctx, req, key, reason, incoming)
		if err != nil {
			return nil, err
		}
		p, err := st.process(ctx, d)
		if err != nil {
			return nil, err
		}
		if p.Outcome != message.OutcomeSettled {
			return nil, &ResolveError{fmt.Sprintf("the correction would be %s %s: state another amount or reject", p.Outcome, p.Reason)}
		}
		identityID = p.identityID
		res.SettlementID, res.Response = settlementID(d.ID), p.Response
		final.Outcome, final.Response = message.OutcomeSettled, p.Response
	}
	st.queueResult(nil, final)
	st.Resolution = &db.CaseResolutionInsertParams{
		CaseID: req.CaseID, TenantID: key.TenantID, Decision: req.Decision, Amount: req.Amount,
		Reason: req.Reason, ResolvedBy: req.By, IdentityID: identityID,
	}
	return res, nil
}

// resolutionRecord builds the correction an accepted case settles: of the
// chain the quarantined record names (or, for a fingerprint mismatch, of
// the stored record), to the stated or incoming amount, against the chain
// as it is when the resolution commits (State.Load locks it), at the chain's
// current version, which the resolution does not change.
func (st *txState) resolutionRecord(ctx context.Context, req ResolveRequest, key record.Identity, reason string, incoming []byte) (*state.Item, error) {
	in, err := st.Shared.Decoder.Decode(incoming, nil)
	if err != nil && reason != message.ReasonFingerprintMismatch {
		// Canonical payloads of refunds, reclaims and releases lack subject
		// and time; they name no chain to correct.
		return nil, &ResolveError{"this record names no usage chain to correct: reject the case"}
	}
	var target state.RecKey
	amount := req.Amount
	switch reason {
	case message.ReasonFingerprintMismatch:
		switch key.Operation {
		case record.KindUsage, record.KindCorrection, record.KindReversal:
		default:
			return nil, &ResolveError{fmt.Sprintf("a %s cannot be corrected: reject the case", key.Operation)}
		}
		target = state.RecKey{Tenant: key.TenantID, Period: key.AccountPeriod, Record: key.RecordID}
		if amount == "" {
			amount = in.Amount
		}
	case message.ReasonOrphan:
		return nil, &ResolveError{"an orphan is applied by itself when its target arrives: wait, or reject the case"}
	default: // invalid_link, target_refunded, version_conflict
		if in.Kind != record.KindCorrection && in.Kind != record.KindReversal && in.Kind != record.KindUsage {
			return nil, &ResolveError{fmt.Sprintf("a %s names no usage chain to correct: reject the case", in.Kind)}
		}
		if amount == "" {
			return nil, &ResolveError{"state the chain's new total with --amount"}
		}
		target = state.RecKey{Tenant: in.TenantID, Period: in.TargetPeriod(), Record: in.Corrects}
		if in.Kind == record.KindUsage {
			return nil, &ResolveError{"a usage names no chain to correct: reject the case"}
		}
	}
	if amount == "" {
		amount = "0"
	}
	d := &state.Item{
		In: &message.Input{},
		ID: record.Identity{TenantID: key.TenantID, AccountPeriod: key.AccountPeriod, RecordID: strconv.FormatInt(req.CaseID, 10), Operation: OperationResolution},
		Rec: record.Record{TenantID: key.TenantID, AccountPeriod: key.AccountPeriod, RecordID: strconv.FormatInt(req.CaseID, 10),
			Kind: record.KindCorrection, Corrects: target.Record, Amount: amount, OccurredAt: st.AttemptStart.UTC()},
	}
	if target.Period != key.AccountPeriod {
		d.Rec.CorrectsPeriod = target.Period
	}
	if err := st.Load(ctx, []state.Item{*d}, nil); err != nil {
		return nil, err
	}
	ch, res := st.resolveChain(target)
	if res != targetFound {
		return nil, &ResolveError{fmt.Sprintf("record %s of period %s is not one settled chain", target.Record, target.Period)}
	}
	if _, err := money.Parse(amount); err != nil {
		return nil, &ResolveError{err.Error()}
	}
	if ch.Rules.Refunded && !ch.Rules.Reclaimed {
		return nil, &ResolveError{"the chain is refunded: a correction would not apply; reject the case"}
	}
	// The incoming payload's amount is of its own subject and currency: it
	// restates the stored record only within the same account (CONTRACT,
	// section 6). An amount the analyst states is the chain's own.
	if reason == message.ReasonFingerprintMismatch && req.Amount == "" && err == nil &&
		(in.Subject != ch.RootSubject || in.Currency != ch.RootCurrency) {
		return nil, &ResolveError{fmt.Sprintf("the incoming payload is for %s in %s, the stored record for %s in %s: "+
			"accepting corrects the stored record only to a payload of its own account; reject the case, or state the stored record's new total with --amount",
			in.Subject, in.Currency, ch.RootSubject, ch.RootCurrency)}
	}
	// The chain's own version: a resolution restates the total and leaves
	// the version to the producer (corrections.Restate).
	d.Rec.Subject, d.Rec.Currency, d.Rec.FinalizationVersion = ch.RootSubject, ch.RootCurrency, ch.Rules.Version
	d.Canonical, _ = json.Marshal(map[string]any{"case_id": req.CaseID, "decision": req.Decision, "amount": amount,
		"corrects": target.Record, "corrects_period": target.Period})
	d.FP = fingerprint.Sum(d.Canonical)
	return d, nil
}
