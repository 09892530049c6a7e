package settle_test

import (
	"encoding/json"
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

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// rawJSON is a pre-encoded JSON value for rec().
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }
