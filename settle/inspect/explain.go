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

	"github.com/settlehq/settle/settle"

	"github.com/jackc/pgx/v5"
)

var (
	sqlIdentityByRecord      = mustQuery("identity_by_record.sql")
	sqlIdentityRef           = mustQuery("identity_ref.sql")
	sqlIdentityByRoot        = mustQuery("identity_by_root.sql")
	sqlDeliveryByIdentity    = mustQuery("delivery_by_identity.sql")
	sqlDeliveryGet           = mustQuery("delivery_get.sql")
	sqlLedgerEntryByIdentity = mustQuery("ledger_entry_by_identity.sql")
	sqlChainGet              = mustQuery("chain_get.sql")
	sqlHoldGet               = mustQuery("hold_get.sql")
	sqlOutboxBySettlement    = mustQuery("outbox_by_settlement.sql")
	sqlWaitingByRecord       = mustQuery("waiting_by_record.sql")
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
}

// Empty reports whether settle has seen nothing of the record.
func (e *Explanation) Empty() bool {
	return len(e.Operations) == 0 && len(e.Waiting) == 0 && len(e.Cases) == 0
}

// ExplainedIdentity is one settled, refused or quarantined identity with
// its deliveries, ledger rows, links and publication state.
type ExplainedIdentity struct {
	ID              int64              `json:"id"`
	Operation       string             `json:"operation"`
	Outcome         string             `json:"outcome"`
	Reason          string             `json:"reason,omitempty"`
	SettlementID    string             `json:"settlement_id,omitempty"`
	Subject         string             `json:"subject,omitempty"`
	Currency        string             `json:"currency,omitempty"`
	Source          string             `json:"source,omitempty"`
	Response        json.RawMessage    `json:"response"`
	Canonical       json.RawMessage    `json:"canonical"`
	Attributes      json.RawMessage    `json:"attributes,omitempty"`
	FirstDelivery   settle.Coordinates `json:"first_delivery"`
	FirstSeenAt     time.Time          `json:"first_seen_at"`
	LastAttemptedAt time.Time          `json:"last_attempted_at"`
	CommittedAt     time.Time          `json:"committed_at"`
	Attempts        int                `json:"attempts"`
	Deliveries      []Delivery         `json:"deliveries"`
	Entries         []LedgerRow        `json:"entries"`
	Links           ExplainLinks       `json:"links"`
	Outbox          []OutboxState      `json:"outbox"`
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
	ID             int64              `json:"id"`
	AccountPeriod  string             `json:"account_period"`
	RecordID       string             `json:"record_id"`
	Operation      string             `json:"operation"`
	TargetPeriod   string             `json:"target_period"`
	TargetRecordID string             `json:"target_record_id"`
	Status         string             `json:"status"`
	CaseID         int64              `json:"case_id,omitempty"`
	Since          time.Time          `json:"since"`
	Source         settle.Coordinates `json:"source"`
	Delivery       *Delivery          `json:"delivery,omitempty"`
	Response       json.RawMessage    `json:"response"`
}

// Explain returns the whole history of one record_id. A record settle has
// never seen gives an Explanation that is Empty, not an error.
func (s *Store) Explain(ctx context.Context, tenant, period, recordID string) (*Explanation, error) {
	what := fmt.Sprintf("explain tenant=%s period=%s record=%s", tenant, period, recordID)
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, wrapStoreErr(what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	e := &Explanation{TenantID: tenant, AccountPeriod: period, RecordID: recordID}
	if e.Operations, err = s.explainIdentities(ctx, tx, tenant, period, recordID); err != nil {
		return nil, wrapStoreErr(what, err)
	}
	if e.Waiting, err = explainWaiting(ctx, tx, tenant, period, recordID); err != nil {
		return nil, wrapStoreErr(what, err)
	}
	if e.Cases, err = casesByRecord(ctx, tx, tenant, period, recordID); err != nil {
		return nil, err
	}
	return e, nil
}

func (s *Store) explainIdentities(ctx context.Context, tx pgx.Tx, tenant, period, recordID string) ([]ExplainedIdentity, error) {
	rows, err := tx.Query(ctx, sqlIdentityByRecord, tenant, period, recordID)
	if err != nil {
		return nil, err
	}
	type links struct{ root, target, account int64 }
	var (
		ops []ExplainedIdentity
		ls  []links
	)
	for rows.Next() {
		var (
			x                 ExplainedIdentity
			l                 links
			resp, canon, attr []byte
		)
		if err := rows.Scan(&x.ID, &x.Operation, &x.Outcome, &x.Reason, &x.SettlementID, &x.Subject, &x.Currency,
			&resp, &canon, &x.Source, &attr, &x.FirstDelivery.Topic, &x.FirstDelivery.Partition, &x.FirstDelivery.Offset,
			&x.FirstSeenAt, &x.LastAttemptedAt, &x.CommittedAt, &x.Attempts, &l.root, &l.target, &l.account); err != nil {
			rows.Close()
			return nil, err
		}
		x.Response, x.Canonical = json.RawMessage(resp), json.RawMessage(canon)
		if attr != nil {
			x.Attributes = json.RawMessage(attr)
		}
		ops, ls = append(ops, x), append(ls, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if ops == nil {
		ops = []ExplainedIdentity{}
	}
	for i := range ops {
		x := &ops[i]
		if x.Deliveries, err = readDeliveries(ctx, tx, sqlDeliveryByIdentity, x.ID); err != nil {
			return nil, err
		}
		if x.Entries, err = ledgerRows(ctx, tx, x.ID); err != nil {
			return nil, err
		}
		if ls[i].root != 0 && ls[i].root != x.ID {
			if x.Links.Root, err = identityRef(ctx, tx, ls[i].root); err != nil {
				return nil, err
			}
		}
		if ls[i].target != 0 {
			if x.Links.Target, err = identityRef(ctx, tx, ls[i].target); err != nil {
				return nil, err
			}
		}
		if ls[i].root == x.ID {
			if x.Links.Corrections, x.Links.Chain, err = chainLinks(ctx, tx, x.ID); err != nil {
				return nil, err
			}
		}
		if x.Operation == "hold" && x.Outcome == string(settle.OutcomeSettled) {
			if x.Links.Hold, err = holdLinks(ctx, tx, x.ID); err != nil {
				return nil, err
			}
		}
		x.Outbox = []OutboxState{}
		if x.SettlementID != "" {
			if x.Outbox, err = s.outboxState(ctx, tx, x.SettlementID, x.CommittedAt); err != nil {
				return nil, err
			}
		}
	}
	return ops, nil
}

func ledgerRows(ctx context.Context, q querier, identityID int64) ([]LedgerRow, error) {
	rows, err := q.Query(ctx, sqlLedgerEntryByIdentity, identityID)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LedgerRow, error) {
		var e LedgerRow
		err := r.Scan(&e.ID, &e.AccountID, &e.Subject, &e.Currency, &e.Bucket, &e.Amount, &e.CreatedAt)
		return e, err
	})
	if out == nil {
		out = []LedgerRow{}
	}
	return out, err
}

func identityRefs(ctx context.Context, q querier, ids []int64) (map[int64]IdentityRef, error) {
	rows, err := q.Query(ctx, sqlIdentityRef, ids)
	if err != nil {
		return nil, err
	}
	refs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (IdentityRef, error) {
		var x IdentityRef
		err := r.Scan(&x.ID, &x.AccountPeriod, &x.RecordID, &x.Operation, &x.Outcome, &x.SettlementID)
		return x, err
	})
	if err != nil {
		return nil, err
	}
	m := make(map[int64]IdentityRef, len(refs))
	for _, x := range refs {
		m[x.ID] = x
	}
	return m, nil
}

func identityRef(ctx context.Context, q querier, id int64) (*IdentityRef, error) {
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

func chainLinks(ctx context.Context, q querier, root int64) ([]IdentityRef, *ChainState, error) {
	rows, err := q.Query(ctx, sqlIdentityByRoot, root, chainMembersMax)
	if err != nil {
		return nil, nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
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
	var (
		c                   ChainState
		refundID, reclaimID int64
	)
	err = q.QueryRow(ctx, sqlChainGet, root).Scan(&c.NetCharge, &c.Version, &refundID, &c.Refunded, &reclaimID, &c.Recovered)
	if errors.Is(err, pgx.ErrNoRows) {
		return members, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if c.Refund, err = identityRef(ctx, q, refundID); err != nil {
		return nil, nil, err
	}
	if c.Reclaim, err = identityRef(ctx, q, reclaimID); err != nil {
		return nil, nil, err
	}
	return members, &c, nil
}

func holdLinks(ctx context.Context, q querier, id int64) (*HoldState, error) {
	var (
		h        HoldState
		closedBy int64
	)
	err := q.QueryRow(ctx, sqlHoldGet, id).Scan(&h.Amount, &h.Remaining, &h.Status, &h.ExpiresAt, &closedBy)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if h.ClosedBy, err = identityRef(ctx, q, closedBy); err != nil {
		return nil, err
	}
	return &h, nil
}

func (s *Store) outboxState(ctx context.Context, q querier, settlementID string, committedAt time.Time) ([]OutboxState, error) {
	rows, err := q.Query(ctx, sqlOutboxBySettlement, s.cfg.SettlementsTopic,
		base64.StdEncoding.EncodeToString([]byte(settlementID)), committedAt)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (OutboxState, error) {
		var o OutboxState
		err := r.Scan(&o.ID, &o.Topic, &o.CreatedAt, &o.Published, &o.Parked)
		return o, err
	})
	if out == nil {
		out = []OutboxState{}
	}
	return out, err
}

func explainWaiting(ctx context.Context, q querier, tenant, period, recordID string) ([]WaitingOp, error) {
	rows, err := q.Query(ctx, sqlWaitingByRecord, tenant, period, recordID)
	if err != nil {
		return nil, err
	}
	ws, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WaitingOp, error) {
		var (
			w    WaitingOp
			resp []byte
		)
		err := r.Scan(&w.ID, &w.AccountPeriod, &w.RecordID, &w.Operation, &w.TargetPeriod, &w.TargetRecordID, &w.Status,
			&w.CaseID, &w.Since, &w.Source.Topic, &w.Source.Partition, &w.Source.Offset, &resp)
		w.Response = json.RawMessage(resp)
		return w, err
	})
	if err != nil {
		return nil, err
	}
	out := []WaitingOp{}
	seen := map[int64]bool{}
	for _, w := range ws {
		if seen[w.ID] {
			continue
		}
		seen[w.ID] = true
		ds, err := readDeliveries(ctx, q, sqlDeliveryGet, w.Source.Topic, w.Source.Partition, w.Source.Offset, tenant)
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
