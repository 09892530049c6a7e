package reconcile_test

import (
	"testing"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/settletest"
)

// The record builders and checks of settletest, by the short names these
// tests use.
var (
	rec             = settletest.Rec
	grant           = settletest.Grant
	batch           = settletest.Batch
	clone           = settletest.Clone
	mustSettle      = settletest.MustSettle
	outcomes        = settletest.Outcomes
	checkInvariants = settletest.CheckInvariants
	count           = settletest.Count
	balance         = settletest.Balance
	signal          = settletest.Signal
)

func newStore(t *testing.T) *settle.Store {
	t.Helper()
	return settletest.NewStore(t, settle.Config{})
}
