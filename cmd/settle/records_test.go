package main

import (
	"context"
	"testing"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// acmeRecord is the JSON of a record of tenant acme's customer cust-1 in
// period 2026-11, with the members fields (record_id, kind, ...) added.
func acmeRecord(fields string) string {
	return `{"tenant_id":"acme","account_period":"2026-11","subject":"cust-1","occurred_at":"2026-11-03T10:00:00Z",` + fields + `}`
}

// settledDatabase creates a database for t, settles recs on it in one batch
// (topic usage, partition 0, offsets 0, 1, ...) and returns the database's
// URL, for the commands under test, and the store.
func settledDatabase(t *testing.T, recs ...string) (string, *settle.Store) {
	t.Helper()
	url := settletest.NewDatabase(t)
	store := settletest.NewStoreOn(t, url, settle.Config{})
	ins := make([]message.Input, len(recs))
	for i, r := range recs {
		ins[i] = message.Input{Topic: "usage", Offset: int64(i), Value: []byte(r)}
	}
	if _, err := store.Settle(context.Background(), "", store.Decode(ins)); err != nil {
		t.Fatal(err)
	}
	return url, store
}
