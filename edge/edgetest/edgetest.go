// Package edgetest is test support for the HTTP edge's packages (edge/ingest,
// edge/webhook): a store that works as the service role, as the running
// service does, and the counts their tests read back. Tests only: production
// code never imports it.
package edgetest

import (
	"context"
	"testing"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/settletest"
)

// AppStore gives t its own migrated database and a store on a pool of
// maxConns connections that works as the service role settle_app, so the
// grants of the migrations are exercised too. The pool closes at cleanup.
func AppStore(t *testing.T, maxConns int32) *settle.Store {
	t.Helper()
	pool := settletest.AppPoolOn(t, settletest.NewDatabase(t), maxConns)
	s, err := settle.Open(context.Background(), pool, settle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Count runs a query on s's pool that returns one integer.
func Count(t *testing.T, s *settle.Store, query string, args ...any) int {
	t.Helper()
	return settletest.Count(t, s.Pool(), query, args...)
}

// LedgerRows counts the ledger rows of one record of tenant acme.
func LedgerRows(t *testing.T, s *settle.Store, record string) int {
	t.Helper()
	return Count(t, s, `SELECT count(*)::int FROM ledger_entries l JOIN identities i ON i.id = l.identity_id
	                     WHERE i.tenant_id = 'acme' AND i.record_id = $1`, record)
}
