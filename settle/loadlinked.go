package settle

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/record"
)

// loadLinked is load's second round trip: it locks the chains, holds and
// accounts the records found so far reach, and then (one more round trip,
// only when there are some) the accounts reached only through a chain or a
// hold.
func (st *txState) loadLinked(ctx context.Context, waits []*waitingOp, reserving []accountKey) error {
	rootIDs, holdIDs, expiringAccs := st.linkedIDs(reserving)
	accKeys := accountList{known: &st.s.accountIDs}
	for _, w := range waits {
		if k, ok := ownAccount(&w.d.rec); ok {
			accKeys.add(k)
		}
	}
	if len(rootIDs)+len(holdIDs)+len(expiringAccs)+accKeys.len() == 0 {
		return nil
	}
	b := &pgx.Batch{}
	b.Queue(sqlAccountInsert, accKeys.t, accKeys.s, accKeys.c)
	queueAccounts(b, accKeys.t, accKeys.s, accKeys.c, accKeys.ids)
	b.Queue(sqlChainLock, rootIDs)
	b.Queue(sqlChainRoot, rootIDs)
	b.Queue(sqlHoldLock, holdIDs, expiringAccs)
	br := st.tx.SendBatch(ctx, b)
	defer func() { _ = br.Close() }() // for the early returns; the last step checks Close
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("create accounts: %w", err)
	}
	if err := st.readAccounts(br, -1); err != nil {
		return err
	}
	st.accountsByKey = st.accountsByKey || len(accKeys.t) > 0
	pending, err := readChains(br)
	if err != nil {
		return err
	}
	if pending, err = readChainRoots(br, pending); err != nil {
		return err
	}
	if err := st.readHolds(br); err != nil {
		return err
	}
	if err := br.Close(); err != nil {
		return err
	}
	if err := st.lockChainAccounts(ctx, pending); err != nil {
		return err
	}
	for _, p := range pending {
		p.ch.a = st.accountsByID[p.accountID]
		st.chains[p.ch.rootID] = p.ch
	}
	for _, h := range st.holds {
		h.a = st.accountsByID[h.accountID]
	}
	return nil
}

// linkedIDs returns the chain roots (not yet loaded) and holds the batch's
// identities name, and the ids of the accounts in reserving, whose expiring
// holds free funds.
func (st *txState) linkedIDs(reserving []accountKey) (rootIDs, holdIDs, expiringAccs []int64) {
	for _, ids := range st.byRecord {
		for _, id := range ids {
			switch {
			case id.outcome == OutcomeQuarantined:
			case id.key.Operation == record.KindHold:
				holdIDs = append(holdIDs, id.id)
			case id.rootID != 0:
				if _, ok := st.chains[id.rootID]; !ok {
					rootIDs = append(rootIDs, id.rootID)
				}
			}
		}
	}
	slices.Sort(rootIDs)
	rootIDs = slices.Compact(rootIDs) // a root named twice in the batch is locked once
	for _, k := range reserving {
		expiringAccs = append(expiringAccs, st.accounts[k].id)
	}
	return rootIDs, holdIDs, expiringAccs
}

// pendingChain is a chain read by loadLinked, with the account it moves,
// until that account is loaded too.
type pendingChain struct {
	ch        *chain
	accountID int64
}

// readChains reads the locked chain rows.
func readChains(br pgx.BatchResults) ([]pendingChain, error) {
	var pending []pendingChain
	rows, _ := br.Query()
	for rows.Next() {
		var (
			ch            chain
			accountID     int64
			net, refunded string
			recovered     bool
		)
		if err := rows.Scan(&ch.rootID, &accountID, &net, &ch.c.Version, &ch.refundID, &refunded, &ch.reclaimID,
			&recovered, &ch.rev, &ch.rootSubject, &ch.rootCurrency, &ch.rootSettlement, &ch.refundSettlement); err != nil {
			return nil, fmt.Errorf("lock chains: %w", err)
		}
		ch.c.NetCharge = money.MustParse(net)
		ch.c.Refunded, ch.c.Refund = ch.refundID != 0, money.MustParse(refunded)
		ch.c.Reclaimed, ch.c.Recovered = ch.reclaimID != 0 && !recovered, recovered
		pending = append(pending, pendingChain{&ch, accountID})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock chains: %w", err)
	}
	return pending, nil
}

// readChainRoots reads the chains' root usages and appends, as new chains,
// those without a chain row: such a chain is its root usage alone. Two
// transactions that both create one collide on chains_pkey and one retries.
func readChainRoots(br pgx.BatchResults, pending []pendingChain) ([]pendingChain, error) {
	locked := map[int64]bool{}
	for _, p := range pending {
		locked[p.ch.rootID] = true
	}
	rows, _ := br.Query()
	for rows.Next() {
		var (
			ch        chain
			accountID int64
			canonical []byte
		)
		if err := rows.Scan(&ch.rootID, &canonical, &ch.rootSubject, &ch.rootCurrency, &ch.rootSettlement, &accountID); err != nil {
			return nil, fmt.Errorf("read chain roots: %w", err)
		}
		if locked[ch.rootID] {
			continue
		}
		fields, err := record.CanonicalFields(canonical)
		if err != nil {
			return nil, fmt.Errorf("chain root %d: %w", ch.rootID, err)
		}
		ch.c.NetCharge = money.MustParse(fields["amount"])
		if ch.c.Version, err = strconv.ParseInt(fields["finalization_version"], 10, 64); err != nil {
			return nil, fmt.Errorf("chain root %d: finalization_version: %w", ch.rootID, err)
		}
		ch.isNew = true
		pending = append(pending, pendingChain{&ch, accountID})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read chain roots: %w", err)
	}
	return pending, nil
}

// lockChainAccounts locks the accounts reached only through a chain or a
// hold, in one more round trip when there are any.
func (st *txState) lockChainAccounts(ctx context.Context, pending []pendingChain) error {
	var missing []int64
	for _, p := range pending {
		if st.accountsByID[p.accountID] == nil {
			missing = append(missing, p.accountID)
		}
	}
	for _, h := range st.holds {
		if st.accountsByID[h.accountID] == nil {
			missing = append(missing, h.accountID)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	queueAccountsByID(b, missing)
	br := st.tx.SendBatch(ctx, b)
	if err := st.readAccounts(br, -1); err != nil {
		_ = br.Close() // the read's error is the one to report
		return err
	}
	return br.Close()
}
