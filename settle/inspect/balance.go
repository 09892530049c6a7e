package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/settle/internal/db"
)

// The ledger's buckets: a row moves the balance or the held amount.
const (
	bucketBalance = "balance"
	bucketHeld    = "held"
)

// AccountView is one account with the rows behind its balance.
type AccountView struct {
	Subject   string      `json:"subject"`
	Currency  string      `json:"currency"`
	Balance   string      `json:"balance"`
	Held      string      `json:"held"`      // reserved by active holds
	Available string      `json:"available"` // balance - held
	Sequence  int64       `json:"sequence"`
	Holds     []HoldView  `json:"holds"`
	Chains    []ChainView `json:"chains"`
	Rows      []RowView   `json:"rows"` // newest first
}

// HoldView is an active hold.
type HoldView struct {
	Period    string     `json:"account_period"`
	RecordID  string     `json:"record_id"`
	Amount    string     `json:"amount"`
	Remaining string     `json:"remaining"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// ChainView is the net view of one chain: a root usage and its adjustments.
type ChainView struct {
	Period      string `json:"account_period"`
	RootRecord  string `json:"root_record_id"`
	NetCharge   string `json:"net_charge"`
	Version     int64  `json:"finalization_version"`
	Adjustments int    `json:"adjustments"`
	Refunded    string `json:"refunded,omitempty"`
	Reclaimed   bool   `json:"reclaimed,omitempty"`
	Recovered   bool   `json:"recovered,omitempty"` // success recorded before any refund
}

// RowView is one ledger row and the identity that wrote it.
type RowView struct {
	ID           int64     `json:"id"`
	Bucket       string    `json:"bucket"`
	Amount       string    `json:"amount"`
	At           time.Time `json:"at"`
	Period       string    `json:"account_period"`
	RecordID     string    `json:"record_id"`
	Operation    string    `json:"operation"`
	SettlementID string    `json:"settlement_id"`
	Root         string    `json:"root_record_id,omitempty"`
	// BalanceAfter and HeldAfter are the account's balance and held once
	// this row was written.
	BalanceAfter string `json:"balance_after"`
	HeldAfter    string `json:"held_after"`
}

// Balances returns a tenant's accounts (of one subject, or all when subject
// is ""), each with its active holds, its chains and its newest rowsMax
// ledger rows.
func (s *Store) Balances(ctx context.Context, tenant, subject string, rowsMax int) ([]AccountView, error) {
	what := fmt.Sprintf("balances tenant=%s", tenant)
	// One snapshot: each row's balance after is worked back from the
	// account's balance, which must be the one its newest row left.
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	q := db.On(tx)
	accounts, err := q.AccountBalances(ctx, db.AccountBalancesParams{TenantID: tenant, Subject: subject})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var out []AccountView
	for _, a := range accounts {
		v := AccountView{Subject: a.Subject, Currency: a.Currency, Balance: a.Balance, Held: a.Held, Available: a.Available,
			Sequence: a.Seq, Holds: []HoldView{}, Chains: []ChainView{}, Rows: []RowView{}}
		hs, err := q.HoldsOfAccount(ctx, a.ID)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		for _, h := range hs {
			v.Holds = append(v.Holds, HoldView{Period: h.AccountPeriod, RecordID: h.RecordID, Amount: h.Amount,
				Remaining: h.Remaining, ExpiresAt: h.ExpiresAt})
		}
		cs, err := q.ChainsOfAccount(ctx, db.ChainsOfAccountParams{AccountID: a.ID, ChainsMax: int64(rowsMax)})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		for _, c := range cs {
			v.Chains = append(v.Chains, ChainView{Period: c.AccountPeriod, RootRecord: c.RecordID, NetCharge: c.NetCharge,
				Version: c.Version, Adjustments: int(c.Adjustments), Refunded: c.Refunded, Reclaimed: c.Reclaimed, Recovered: c.Recovered})
		}
		es, err := q.LedgerEntriesOfAccount(ctx, db.LedgerEntriesOfAccountParams{TenantID: tenant, AccountID: a.ID, RowsMax: int64(rowsMax)})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		// Newest first: each row leaves what the account holds now, less
		// the rows after it.
		after := map[string]money.Dec{}
		for bucket, now := range map[string]string{bucketBalance: a.Balance, bucketHeld: a.Held} {
			if after[bucket], err = money.Parse(now); err != nil {
				return nil, fmt.Errorf("%s: account %s %s: %s %q: %w", what, a.Subject, a.Currency, bucket, now, err)
			}
		}
		for _, e := range es {
			amount, err := money.Parse(e.Amount)
			if err != nil {
				return nil, fmt.Errorf("%s: row %d: amount %q: %w", what, e.ID, e.Amount, err)
			}
			v.Rows = append(v.Rows, RowView{ID: e.ID, Bucket: e.Bucket, Amount: e.Amount, At: e.CreatedAt, Period: e.AccountPeriod,
				RecordID: e.RecordID, Operation: e.Operation, SettlementID: e.SettlementID, Root: e.RootRecordID,
				BalanceAfter: after[bucketBalance].String(), HeldAfter: after[bucketHeld].String()})
			after[e.Bucket] = after[e.Bucket].Sub(amount)
		}
		out = append(out, v)
	}
	return out, nil
}
