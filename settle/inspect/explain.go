package inspect

// explain: the whole story of one record_id, read in one repeatable-read
// transaction so that its parts agree with each other.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// chainMembersMax caps the corrections listed under one chain.
const chainMembersMax = 1000

// Explanation is everything settle knows about one record_id of one tenant
// and period: each operation on it (usage, refund, reclaim, ...), the
// operations that wait for it or waited, and its conflict cases.
type Explanation struct {
	TenantID      string              `json:"tenant_id"`
	AccountPeriod string              `json:"account_period"`
	RecordID      string              `json:"record_id"`
	Operations    []ExplainedIdentity `json:"operations"`
	Waiting       []WaitingOp         `json:"waiting"`
	Cases         []*Case             `json:"cases"`
	// Letters are the dead letters the record's deliveries were corrected
	// from (settle dlq resend, the letter page's form; with Correction),
	// then those whose bytes name the record (a delivery that did not
	// decode).
	Letters []ExplainedLetter `json:"letters,omitempty"`
}

// ExplainedLetter is a dead letter a delivery of the record came from.
type ExplainedLetter struct {
	ID         int64             `json:"id"`
	Reason     string            `json:"reason"`
	Error      string            `json:"error"`
	At         time.Time         `json:"at"`
	Correction *LetterCorrection `json:"correction,omitempty"`
}

// LetterCorrection is the correction that made a delivery of the record
// from its letter: who, why, and the delivery it made.
type LetterCorrection struct {
	EditID   int64               `json:"edit_id"`
	EditedBy string              `json:"edited_by"`
	Reason   string              `json:"reason"`
	At       time.Time           `json:"at"`
	Delivery message.Coordinates `json:"delivery"`
}

// Empty reports whether settle has seen nothing of the record.
func (e *Explanation) Empty() bool {
	return len(e.Operations) == 0 && len(e.Waiting) == 0 && len(e.Cases) == 0 && len(e.Letters) == 0
}

// explainLetters are the letters the deliveries of ops were corrected
// from.
func explainLetters(ctx context.Context, q *db.Queries, tenant string, ops []ExplainedIdentity) ([]ExplainedLetter, error) {
	var out []ExplainedLetter
	for _, op := range ops {
		for _, dl := range op.Deliveries {
			rows, err := q.DeadLetterResendAt(ctx, db.DeadLetterResendAtParams{TenantID: tenant, Topic: dl.Topic,
				Partition: dl.Partition, ResentOffset: dl.Offset})
			if err != nil {
				return nil, err
			}
			for _, r := range rows {
				out = append(out, ExplainedLetter{ID: r.DeadLetterID, Reason: r.LetterReason, Error: r.LetterError, At: r.LetterAt,
					Correction: &LetterCorrection{EditID: r.ID, EditedBy: r.EditedBy, Reason: r.Reason, At: r.At, Delivery: dl.Coordinates}})
			}
		}
	}
	return out, nil
}

// ExplainedIdentity is one settled, refused or quarantined identity with
// its deliveries, ledger rows, links and publication state.
type ExplainedIdentity struct {
	ID              int64               `json:"id"`
	Operation       string              `json:"operation"`
	Outcome         string              `json:"outcome"`
	Reason          string              `json:"reason,omitempty"`
	SettlementID    string              `json:"settlement_id,omitempty"`
	Subject         string              `json:"subject,omitempty"`
	Currency        string              `json:"currency,omitempty"`
	Source          string              `json:"source,omitempty"`
	Response        json.RawMessage     `json:"response"`
	Canonical       json.RawMessage     `json:"canonical"`
	Attributes      json.RawMessage     `json:"attributes,omitempty"`
	FirstDelivery   message.Coordinates `json:"first_delivery"`
	FirstSeenAt     time.Time           `json:"first_seen_at"`
	LastAttemptedAt time.Time           `json:"last_attempted_at"`
	CommittedAt     time.Time           `json:"committed_at"`
	Attempts        int                 `json:"attempts"`
	Deliveries      []Delivery          `json:"deliveries"`
	Entries         []LedgerRow         `json:"entries"`
	Links           ExplainLinks        `json:"links"`
	Outbox          []OutboxState       `json:"outbox"`
}

// LedgerRow is one ledger row with its account.
type LedgerRow struct {
	ID        int64     `json:"id"`
	AccountID int64     `json:"account_id"`
	Subject   string    `json:"subject"`
	Currency  string    `json:"currency"`
	Bucket    string    `json:"bucket"`
	Amount    string    `json:"amount"`
	CreatedAt time.Time `json:"created_at"`
}

// IdentityRef names another identity.
type IdentityRef struct {
	ID            int64  `json:"id"`
	AccountPeriod string `json:"account_period"`
	RecordID      string `json:"record_id"`
	Operation     string `json:"operation"`
	Outcome       string `json:"outcome"`
	SettlementID  string `json:"settlement_id,omitempty"`
}

// ExplainLinks are the identities an identity is linked to.
type ExplainLinks struct {
	Root        *IdentityRef  `json:"root,omitempty"`        // the chain's root usage
	Target      *IdentityRef  `json:"target,omitempty"`      // what a refund, reclaim, capture or release acted on
	Corrections []IdentityRef `json:"corrections,omitempty"` // of a root: its corrections and reversals
	Chain       *ChainState   `json:"chain,omitempty"`       // of a root
	Hold        *HoldState    `json:"hold,omitempty"`        // of a hold
}

// ChainState is a chain's derived state.
type ChainState struct {
	NetCharge string       `json:"net_charge"`
	Version   int64        `json:"version"`
	Refund    *IdentityRef `json:"refund,omitempty"`
	Refunded  string       `json:"refunded,omitempty"`
	Reclaim   *IdentityRef `json:"reclaim,omitempty"`
	Recovered bool         `json:"recovered"`
}

// HoldState is a hold's state.
type HoldState struct {
	Amount    string       `json:"amount"`
	Remaining string       `json:"remaining"`
	Status    string       `json:"status"`
	ExpiresAt *time.Time   `json:"expires_at,omitempty"`
	ClosedBy  *IdentityRef `json:"closed_by,omitempty"`
}

// OutboxState is one outbox row that publishes a settlement: published
// once the broker acknowledged it (the message's timestamp on the topic
// says when).
type OutboxState struct {
	ID        int64     `json:"id"`
	Topic     string    `json:"topic"`
	CreatedAt time.Time `json:"created_at"`
	Published bool      `json:"published"`
	Parked    bool      `json:"parked,omitempty"` // the broker refused it for good: never published
}

// WaitingOp is an operation that waits (or waited) for its target.
type WaitingOp struct {
	ID             int64               `json:"id"`
	AccountPeriod  string              `json:"account_period"`
	RecordID       string              `json:"record_id"`
	Operation      string              `json:"operation"`
	TargetPeriod   string              `json:"target_period"`
	TargetRecordID string              `json:"target_record_id"`
	Status         string              `json:"status"`
	CaseID         int64               `json:"case_id,omitempty"`
	Since          time.Time           `json:"since"`
	Source         message.Coordinates `json:"source"`
	Delivery       *Delivery           `json:"delivery,omitempty"`
	Response       json.RawMessage     `json:"response"`
}

// Explain returns the whole history of one record_id. A record settle has
// never seen gives an Explanation that is Empty, not an error.
func (s *Store) Explain(ctx context.Context, tenant, period, recordID string) (*Explanation, error) {
	what := fmt.Sprintf("explain tenant=%s period=%s record=%s", tenant, period, recordID)
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, dberr.Wrap(what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := db.On(tx)
	e := &Explanation{TenantID: tenant, AccountPeriod: period, RecordID: recordID}
	if e.Operations, err = s.explainIdentities(ctx, q, tenant, period, recordID); err != nil {
		return nil, dberr.Wrap(what, err)
	}
	if e.Waiting, err = explainWaiting(ctx, q, tenant, period, recordID); err != nil {
		return nil, dberr.Wrap(what, err)
	}
	if e.Letters, err = explainLetters(ctx, q, tenant, e.Operations); err != nil {
		return nil, dberr.Wrap("explain: dead letters", err)
	}
	dead, err := q.DeadLetterByRecord(ctx, db.DeadLetterByRecordParams{TenantID: tenant, RecordID: recordID, AccountPeriod: period})
	if err != nil {
		return nil, dberr.Wrap("explain: dead letters", err)
	}
	corrected := map[int64]bool{}
	for _, l := range e.Letters {
		corrected[l.ID] = true
	}
	for _, r := range dead {
		if !corrected[r.ID] { // listed with its correction already
			e.Letters = append(e.Letters, ExplainedLetter{ID: r.ID, Reason: r.Reason, Error: r.Error, At: r.At})
		}
	}
	if e.Cases, err = casesByRecord(ctx, q, tenant, period, recordID); err != nil {
		return nil, err
	}
	return e, nil
}

func (s *Store) explainIdentities(ctx context.Context, q *db.Queries, tenant, period, recordID string) ([]ExplainedIdentity, error) {
	rows, err := q.IdentityByRecord(ctx, db.IdentityByRecordParams{TenantID: tenant, AccountPeriod: period, RecordID: recordID})
	if err != nil {
		return nil, err
	}
	ops := make([]ExplainedIdentity, 0, len(rows))
	for _, r := range rows {
		x := ExplainedIdentity{ID: r.ID, Operation: r.Operation, Outcome: r.Outcome, Reason: r.Reason, SettlementID: r.SettlementID,
			Subject: r.Subject, Currency: r.Currency, Source: r.Source, Response: json.RawMessage(r.Response),
			Canonical:     json.RawMessage(r.Canonical),
			FirstDelivery: message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset},
			FirstSeenAt:   r.FirstSeenAt, LastAttemptedAt: r.LastAttemptedAt, CommittedAt: r.CommittedAt, Attempts: int(r.Attempts)}
		if r.Attributes != nil {
			x.Attributes = json.RawMessage(r.Attributes)
		}
		if x.Deliveries, err = deliveries(q.DeliveryByIdentity(ctx, x.ID)); err != nil {
			return nil, err
		}
		if x.Entries, err = ledgerRows(ctx, q, x.ID); err != nil {
			return nil, err
		}
		if r.RootID != 0 && r.RootID != x.ID {
			if x.Links.Root, err = identityRef(ctx, q, r.RootID); err != nil {
				return nil, err
			}
		}
		if r.TargetID != 0 {
			if x.Links.Target, err = identityRef(ctx, q, r.TargetID); err != nil {
				return nil, err
			}
		}
		if r.RootID == x.ID {
			if x.Links.Corrections, x.Links.Chain, err = chainLinks(ctx, q, x.ID); err != nil {
				return nil, err
			}
		}
		if x.Operation == "hold" && x.Outcome == string(message.OutcomeSettled) {
			if x.Links.Hold, err = holdLinks(ctx, q, x.ID); err != nil {
				return nil, err
			}
		}
		x.Outbox = []OutboxState{}
		if x.SettlementID != "" {
			if x.Outbox, err = s.outboxState(ctx, q, x.SettlementID, x.CommittedAt); err != nil {
				return nil, err
			}
		}
		ops = append(ops, x)
	}
	return ops, nil
}

func ledgerRows(ctx context.Context, q *db.Queries, identityID int64) ([]LedgerRow, error) {
	rows, err := q.LedgerEntryByIdentity(ctx, identityID)
	if err != nil {
		return nil, err
	}
	out := make([]LedgerRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, LedgerRow{ID: r.ID, AccountID: r.AccountID, Subject: r.Subject, Currency: r.Currency, Bucket: r.Bucket,
			Amount: r.Amount, CreatedAt: r.CreatedAt})
	}
	return out, nil
}

func identityRefs(ctx context.Context, q *db.Queries, ids []int64) (map[int64]IdentityRef, error) {
	refs, err := q.IdentityRef(ctx, ids)
	if err != nil {
		return nil, err
	}
	m := make(map[int64]IdentityRef, len(refs))
	for _, x := range refs {
		m[x.ID] = IdentityRef{ID: x.ID, AccountPeriod: x.AccountPeriod, RecordID: x.RecordID, Operation: x.Operation,
			Outcome: x.Outcome, SettlementID: x.SettlementID}
	}
	return m, nil
}

func identityRef(ctx context.Context, q *db.Queries, id int64) (*IdentityRef, error) {
	if id == 0 {
		return nil, nil
	}
	m, err := identityRefs(ctx, q, []int64{id})
	if err != nil {
		return nil, err
	}
	if x, ok := m[id]; ok {
		return &x, nil
	}
	return &IdentityRef{ID: id}, nil
}

func chainLinks(ctx context.Context, q *db.Queries, root int64) ([]IdentityRef, *ChainState, error) {
	ids, err := q.IdentityByRoot(ctx, db.IdentityByRootParams{RootID: root, MembersMax: chainMembersMax})
	if err != nil {
		return nil, nil, err
	}
	var members []IdentityRef
	if len(ids) > 0 {
		m, err := identityRefs(ctx, q, ids)
		if err != nil {
			return nil, nil, err
		}
		for _, id := range ids {
			members = append(members, m[id])
		}
	}
	r, err := q.ChainGet(ctx, root)
	if errors.Is(err, pgx.ErrNoRows) {
		return members, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	c := ChainState{NetCharge: r.NetCharge, Version: r.Version, Refunded: r.Refunded, Recovered: r.Recovered}
	if c.Refund, err = identityRef(ctx, q, r.RefundID); err != nil {
		return nil, nil, err
	}
	if c.Reclaim, err = identityRef(ctx, q, r.ReclaimID); err != nil {
		return nil, nil, err
	}
	return members, &c, nil
}

func holdLinks(ctx context.Context, q *db.Queries, id int64) (*HoldState, error) {
	r, err := q.HoldGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h := HoldState{Amount: r.Amount, Remaining: r.Remaining, Status: r.Status, ExpiresAt: r.ExpiresAt}
	if h.ClosedBy, err = identityRef(ctx, q, r.ClosedBy); err != nil {
		return nil, err
	}
	return &h, nil
}

func (s *Store) outboxState(ctx context.Context, q *db.Queries, settlementID string, committedAt time.Time) ([]OutboxState, error) {
	rows, err := q.OutboxBySettlement(ctx, db.OutboxBySettlementParams{Topic: s.cfg.SettlementsTopic,
		SettlementIDBase64: base64.StdEncoding.EncodeToString([]byte(settlementID)), CommittedAt: committedAt})
	if err != nil {
		return nil, err
	}
	out := make([]OutboxState, 0, len(rows))
	for _, r := range rows {
		out = append(out, OutboxState{ID: r.ID, Topic: r.Topic, CreatedAt: r.CreatedAt, Published: r.Published, Parked: r.Parked})
	}
	return out, nil
}

func explainWaiting(ctx context.Context, q *db.Queries, tenant, period, recordID string) ([]WaitingOp, error) {
	ws, err := q.WaitingByRecord(ctx, db.WaitingByRecordParams{TenantID: tenant, AccountPeriod: period, RecordID: recordID})
	if err != nil {
		return nil, err
	}
	out := []WaitingOp{}
	seen := map[int64]bool{}
	for _, r := range ws {
		if seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		w := WaitingOp{ID: r.ID, AccountPeriod: r.AccountPeriod, RecordID: r.RecordID, Operation: r.Operation,
			TargetPeriod: r.TargetPeriod, TargetRecordID: r.TargetRecordID, Status: r.Status, CaseID: r.CaseID, Since: r.Since,
			Source:   message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset},
			Response: json.RawMessage(r.Response)}
		ds, err := deliveries(q.DeliveryGet(ctx, db.DeliveryGetParams{TenantID: tenant, Topic: w.Source.Topic,
			Partition: w.Source.Partition, Offset: w.Source.Offset}))
		if err != nil {
			return nil, err
		}
		if len(ds) > 0 {
			w.Delivery = &ds[0]
		}
		out = append(out, w)
	}
	return out, nil
}
