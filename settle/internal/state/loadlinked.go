package state

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/message"
)

// loadLinked is Load's second round trip: it locks the chains, holds and
// accounts the records found so far reach, and then (one more round trip,
// only when there are some) the accounts reached only through a chain or a
// hold.
func (st *State) loadLinked(ctx context.Context, waits []*Waiting, reserving []AccountKey) error {
	rootIDs, holdIDs, expiringAccs := st.linkedIDs(reserving)
	accKeys := accountList{known: &st.Shared.Accounts}
	for _, w := range waits {
		if k, ok := ownAccount(&w.Item.Rec); ok {
			accKeys.add(k)
		}
	}
	if len(rootIDs)+len(holdIDs)+len(expiringAccs)+accKeys.len() == 0 {
		// Nothing to read: at most accounts whose state this process keeps.
		return st.ReadAccounts(AccountReads{kept: accKeys.kept}, -1)
	}
	p := pgq.NewPipeline(st.Tx)
	defer p.Close() // for the early returns; the last step is Send
	q := db.New(p)
	accounts := queueAccounts(ctx, q, &accKeys)
	chains := q.ChainLock(ctx, [][]int64{rootIDs})
	roots := q.ChainRoot(ctx, [][]int64{rootIDs})
	holds := q.HoldLock(ctx, []db.HoldLockParams{{IdentityIds: holdIDs, ExpiringAccountIds: expiringAccs}})
	if err := st.ReadAccounts(accounts, -1); err != nil {
		return err
	}
	st.accountsByKey = st.accountsByKey || len(accKeys.t) > 0
	pending, err := readChains(chains)
	if err != nil {
		return err
	}
	if pending, err = readChainRoots(roots, pending); err != nil {
		return err
	}
	if err := st.ReadHolds(holds); err != nil {
		return err
	}
	if err := p.Send(ctx); err != nil {
		return err
	}
	if err := st.lockChainAccounts(ctx, pending); err != nil {
		return err
	}
	for _, p := range pending {
		p.ch.Account = st.AccountsByID[p.accountID]
		st.Chains[p.ch.RootID] = p.ch
	}
	for _, h := range st.Holds {
		h.Account = st.AccountsByID[h.AccountID]
	}
	return nil
}

// linkedIDs returns the chain roots (not yet loaded) and holds the batch's
// identities name, and the ids of the accounts in reserving, whose expiring
// holds free funds.
func (st *State) linkedIDs(reserving []AccountKey) (rootIDs, holdIDs, expiringAccs []int64) {
	for _, ids := range st.ByRecord {
		for _, id := range ids {
			switch {
			case id.Outcome == message.OutcomeQuarantined:
			case id.Key.Operation == record.KindHold:
				holdIDs = append(holdIDs, id.ID)
			case id.RootID != 0:
				if _, ok := st.Chains[id.RootID]; !ok {
					rootIDs = append(rootIDs, id.RootID)
				}
			}
		}
	}
	slices.Sort(rootIDs)
	rootIDs = slices.Compact(rootIDs) // a root named twice in the batch is locked once
	for _, k := range reserving {
		expiringAccs = append(expiringAccs, st.Accounts[k].ID)
	}
	return rootIDs, holdIDs, expiringAccs
}

// pendingChain is a chain read by loadLinked, with the account it moves,
// until that account is loaded too.
type pendingChain struct {
	ch        *Chain
	accountID int64
}

// readChains reads the locked chain rows.
func readChains(res *db.ChainLockBatchResults) ([]pendingChain, error) {
	rows, err := pgq.Rows(res.Query)
	if err != nil {
		return nil, fmt.Errorf("lock chains: %w", err)
	}
	var pending []pendingChain
	for _, row := range rows {
		ch := &Chain{
			RootID: row.RootID, RefundID: row.RefundID, ReclaimID: row.ReclaimID, rev: row.Rev,
			RootSubject: row.RootSubject, RootCurrency: row.RootCurrency,
			RootSettlement: row.RootSettlementID, RefundSettlement: row.RefundSettlementID,
		}
		ch.Rules.NetCharge, ch.Rules.Version = money.MustParse(row.NetCharge), row.Version
		ch.Rules.Refunded, ch.Rules.Refund = row.RefundID != 0, money.MustParse(row.Refunded)
		ch.Rules.Reclaimed, ch.Rules.Recovered = row.ReclaimID != 0 && !row.Recovered, row.Recovered
		pending = append(pending, pendingChain{ch, row.AccountID})
	}
	return pending, nil
}

// readChainRoots reads the chains' root usages and appends, as new chains,
// those without a chain row: such a chain is its root usage alone. Two
// transactions that both create one collide on chains_pkey and one retries.
func readChainRoots(res *db.ChainRootBatchResults, pending []pendingChain) ([]pendingChain, error) {
	locked := map[int64]bool{}
	for _, p := range pending {
		locked[p.ch.RootID] = true
	}
	rows, err := pgq.Rows(res.Query)
	if err != nil {
		return nil, fmt.Errorf("read chain roots: %w", err)
	}
	for _, row := range rows {
		if locked[row.ID] {
			continue
		}
		ch := Chain{RootID: row.ID, RootSubject: row.Subject, RootCurrency: row.Currency, RootSettlement: row.SettlementID}
		accountID := row.AccountID
		fields, err := fingerprint.CanonicalFields(row.Canonical)
		if err != nil {
			return nil, fmt.Errorf("chain root %d: %w", ch.RootID, err)
		}
		ch.Rules.NetCharge = money.MustParse(fields["amount"])
		if ch.Rules.Version, err = strconv.ParseInt(fields["finalization_version"], 10, 64); err != nil {
			return nil, fmt.Errorf("chain root %d: finalization_version: %w", ch.RootID, err)
		}
		ch.IsNew = true
		pending = append(pending, pendingChain{&ch, accountID})
	}
	return pending, nil
}

// lockChainAccounts locks the accounts reached only through a chain or a
// hold, in one more round trip when there are any.
func (st *State) lockChainAccounts(ctx context.Context, pending []pendingChain) error {
	var missing []int64
	for _, p := range pending {
		if st.AccountsByID[p.accountID] == nil {
			missing = append(missing, p.accountID)
		}
	}
	for _, h := range st.Holds {
		if st.AccountsByID[h.AccountID] == nil {
			missing = append(missing, h.AccountID)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	p := pgq.NewPipeline(st.Tx)
	defer p.Close() // for the early return; the last step is Send
	if err := st.ReadAccounts(QueueAccountsByID(ctx, db.New(p), missing), -1); err != nil {
		return err
	}
	return p.Send(ctx)
}
