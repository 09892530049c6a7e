package reconcile

import (
	"context"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/internal/db"
)

// Totals are counts over a whole database, for a caller that knows what it
// sent (the benchmark, tests): one delivery per input, one identity per
// logical record, one effect per identity and one settlement message per
// effect are then equalities it checks.
type Totals struct {
	Deliveries           int64 // delivery rows
	DeliveredCoordinates int64 // distinct input coordinates among them
	Identities           int64 // stored identities
	Settled              int64 // stored identities that settled
	Waiting              int64 // operations still waiting (not applied)
	EntriesExpected      int64 // ledger rows the stored responses announce
	Entries              int64 // ledger rows written
	SettledEffects       int64 // settled identities with ledger rows
	OutboxSettlements    int64 // outbox rows for the settlements topic
	SplitEffects         int64 // identities whose rows more than one transaction wrote
	BadAccounts          int64 // accounts whose balance or held (account_states) differs from their rows
	Unpublished          int64 // outbox rows the relay has not published
	Keys                 int64 // the HTTP edge's Idempotency-Keys stored
	KeysDone             int64 // of them, answered
	KeysInProgress       int64 // of them, still claimed by an attempt
}

// Count reads the Totals of the database of store, in one statement (one
// snapshot).
func Count(ctx context.Context, store *settle.Store) (Totals, error) {
	r, err := db.On(store.Pool()).Totals(ctx, store.Config().SettlementsTopic)
	if err != nil {
		return Totals{}, dberr.Wrap("count totals", err)
	}
	return Totals(r), nil
}

// Progress is how far a running pipeline has got, for a caller waiting
// for it to catch up (the tests): cheap enough to poll, unlike Count.
type Progress struct {
	Deliveries  int64 // delivery rows
	Unpublished int64 // outbox rows the relay has not published
}

// ReadProgress reads the Progress of the database of store.
func ReadProgress(ctx context.Context, store *settle.Store) (Progress, error) {
	r, err := db.On(store.Pool()).Progress(ctx)
	if err != nil {
		return Progress{}, dberr.Wrap("read progress", err)
	}
	return Progress(r), nil
}
