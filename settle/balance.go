package settle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	sqlAccountBalances        = mustQuery("account_balances.sql")
	sqlLedgerEntriesOfAccount = mustQuery("ledger_entries_of_account.sql")
	sqlHoldsOfAccount         = mustQuery("holds_of_account.sql")
	sqlChainsOfAccount        = mustQuery("chains_of_account.sql")
	sqlPeriodClose            = mustQuery("period_close.sql")
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
}

// Balances returns a tenant's accounts (of one subject, or all when subject
// is ""), each with its active holds, its chains and its newest rowsMax
// ledger rows.
func (s *Store) Balances(ctx context.Context, tenant, subject string, rowsMax int) ([]AccountView, error) {
	rows, _ := s.pool.Query(ctx, sqlAccountBalances, tenant, subject)
	var ids []int64
	var out []AccountView
	for rows.Next() {
		var id int64
		var v AccountView
		if err := rows.Scan(&id, &v.Subject, &v.Currency, &v.Balance, &v.Held, &v.Available, &v.Sequence); err != nil {
			return nil, err
		}
		ids, out = append(ids, id), append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("balances tenant=%s: %w", tenant, err)
	}
	for i, id := range ids {
		v := &out[i]
		v.Holds, v.Chains, v.Rows = []HoldView{}, []ChainView{}, []RowView{}
		hs, _ := s.pool.Query(ctx, sqlHoldsOfAccount, id)
		for hs.Next() {
			var h HoldView
			if err := hs.Scan(&h.Period, &h.RecordID, &h.Amount, &h.Remaining, &h.ExpiresAt, new(string)); err != nil {
				return nil, err
			}
			v.Holds = append(v.Holds, h)
		}
		if err := hs.Err(); err != nil {
			return nil, err
		}
		cs, _ := s.pool.Query(ctx, sqlChainsOfAccount, id, rowsMax)
		for cs.Next() {
			var c ChainView
			if err := cs.Scan(&c.Period, &c.RootRecord, &c.NetCharge, &c.Version, &c.Refunded, &c.Reclaimed, &c.Recovered, &c.Adjustments); err != nil {
				return nil, err
			}
			v.Chains = append(v.Chains, c)
		}
		if err := cs.Err(); err != nil {
			return nil, err
		}
		es, _ := s.pool.Query(ctx, sqlLedgerEntriesOfAccount, id, rowsMax)
		for es.Next() {
			var r RowView
			if err := es.Scan(&r.ID, &r.Bucket, &r.Amount, &r.At, &r.Period, &r.RecordID, &r.Operation, &r.SettlementID, &r.Root); err != nil {
				return nil, err
			}
			v.Rows = append(v.Rows, r)
		}
		if err := es.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ClosePeriod marks a tenant's period closed: its later records still
// settle and are flagged late. Closing a closed period changes nothing
// (already is true). It holds the period's lock exclusively (periodLocks),
// so it waits for the transactions settling in the period, and every
// settlement committed after it returns is flagged late.
func (s *Store) ClosePeriod(ctx context.Context, tenant, period, by string) (already bool, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		wholePeriod(tenant, period).queue(b)
		b.Queue(sqlPeriodClose, tenant, period, by)
		br := tx.SendBatch(ctx, b)
		defer func() { _ = br.Close() }() // for the early returns; the last step checks Close
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock period: %w", err)
		}
		var at time.Time
		err := br.QueryRow().Scan(&at)
		if errors.Is(err, pgx.ErrNoRows) {
			already = true
			err = nil
		}
		if err != nil {
			return fmt.Errorf("mark period closed: %w", err)
		}
		return br.Close()
	})
	if err != nil {
		return false, fmt.Errorf("close period tenant=%s period=%s: %w", tenant, period, err)
	}
	return already, nil
}
