package settle_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/reconcile"
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

// reconcileClean runs the invariant checker on s's database with in and
// fails the test on an error or any finding, saying after what.
func reconcileClean(t *testing.T, s *settle.Store, in reconcile.Input, after string) {
	t.Helper()
	rep, err := reconcile.Run(context.Background(), s, in)
	if err != nil {
		t.Fatalf("reconcile %s: %v", after, err)
	}
	if !rep.Clean() {
		t.Errorf("reconcile %s: %+v", after, rep.Findings)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// rawJSON is a pre-encoded JSON value for rec().
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }
