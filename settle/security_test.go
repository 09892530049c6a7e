package settle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/relay/outbox"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/reconcile"
	"github.com/settlehq/settle/settle/settletest"
)

// TestServiceRoleCannotRewriteHistory: as settle_app (the role the service
// runs as), every UPDATE, DELETE and TRUNCATE of ledger rows, conflict
// history and resolutions is refused by the grants — "permission denied",
// before any trigger is reached — while the bookkeeping columns the
// service needs stay writable.
func TestServiceRoleCannotRewriteHistory(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	rs := mustSettle(t, s, batch(0, 0, grant("g-1", "c", "5"), rec("record_id", "u-1"), rec("record_id", "u-1", "amount", "41")))
	if rs[2].Outcome != message.OutcomeQuarantined {
		t.Fatalf("fixture: %v", outcomes(rs))
	}
	if _, err := s.Pool().Exec(context.Background(), `INSERT INTO case_resolutions (case_id, tenant_id, decision, reason, resolved_by)
	            SELECT id, tenant_id, 'reject', 'test', 'tester' FROM conflict_cases`); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"UPDATE ledger_entries SET amount = 0",
		"DELETE FROM ledger_entries",
		"TRUNCATE ledger_entries CASCADE",
		"UPDATE identities SET response = '{}'",
		"DELETE FROM identities",
		"UPDATE conflict_cases SET incoming_canonical = '', diff = '[]'",
		"UPDATE conflict_cases SET reason = 'x'",
		"DELETE FROM conflict_cases",
		"TRUNCATE conflict_cases CASCADE",
		"UPDATE case_resolutions SET decision = 'accept'",
		"UPDATE case_resolutions SET reason = 'rewritten', resolved_by = 'someone else'",
		"DELETE FROM case_resolutions",
		"TRUNCATE case_resolutions",
		"UPDATE delivery_repeats SET outcome = 'settled'",
		"DELETE FROM delivery_repeats",
		"DELETE FROM dead_letters",
		"UPDATE accounts SET tenant_id = 'other'",
		"DELETE FROM accounts",
		"UPDATE accounts SET created_at = now()", // an account row is its key, written once
		"DELETE FROM outbox",
		"UPDATE outbox SET value = ''",
		"DELETE FROM outbox_settlements",
		"UPDATE outbox_settlements SET topic = ''",
	} {
		err := asServiceRole(ctx, s.Pool(), stmt)
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("settle_app %q: err = %v, want permission denied", stmt, err)
		}
	}
	for _, stmt := range []string{
		"UPDATE conflict_cases SET status = 'open', closed_at = NULL", // closing a case is the service's job
		"DELETE FROM outbox_queue",                                    // taking published rows off the relay's queue
		"UPDATE outbox_queue SET ids = ids",                           // leaving on a queue row the messages still to publish
	} {
		if err := asServiceRole(ctx, s.Pool(), stmt); err != nil {
			t.Errorf("settle_app %q: %v, want allowed", stmt, err)
		}
	}
}

// asServiceRole runs stmt as settle_app in a transaction rolled back after.
func asServiceRole(ctx context.Context, pool *pgxpool.Pool, stmt string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE settle_app"); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, stmt)
	return err
}

// TestServiceRoleIsEnough: a store whose every connection runs as settle_app
// settles every kind, opens cases, publishes its outbox and reconciles:
// least privilege does not cost the service anything it needs.
func TestServiceRoleIsEnough(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := settletest.AppPoolOn(t, settletest.NewDatabase(t), 0)
	s := settletest.StoreOn(t, pool, settle.Config{})
	var who string
	if err := pool.QueryRow(ctx, `SELECT current_user`).Scan(&who); err != nil || who != "settle_app" {
		t.Fatalf("current_user = %q, %v", who, err)
	}
	rs := mustSettle(t, s, batch(0, 0,
		grant("g-1", "cust-1", "100"),
		rec("record_id", "u-1", "amount", "40"),
		rec("record_id", "u-1", "amount", "41"), // conflict: a case
		rec("record_id", "h-1", "kind", "hold", "amount", "10", "meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil),
		rec("record_id", "u-2", "amount", "7", "hold_id", "h-1"),
		rec("record_id", "c-1", "kind", "correction", "corrects", "u-1", "amount", "30", "finalization_version", 2),
		signal("refund", "u-2", "cust-1"),
		signal("reclaim", "u-2", "cust-1"),
		signal("refund", "u-9", "cust-1"), // waits
	))
	want := "settled settled quarantined:fingerprint_mismatch settled settled settled settled settled waiting"
	if got := strings.Join(outcomes(rs), " "); got != want {
		t.Errorf("outcomes as settle_app:\n got %s\nwant %s", got, want)
	}
	lease, err := outbox.New(s).Lease(ctx, 42)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close(ctx)
	if ok, err := lease.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("lease as settle_app: %v %v", ok, err)
	}
	msgs, err := lease.Pending(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	if err := lease.MarkPublished(ctx, ids); err != nil {
		t.Fatalf("mark published as settle_app: %v", err)
	}
	reconcileClean(t, s, reconcile.Input{Group: "g"}, "as settle_app")
	if n, err := inspect.New(s).OpenConflictCases(ctx); err != nil || n != 1 {
		t.Errorf("open cases = %d, %v; want 1", n, err)
	}
}

// TestTenantIsolation: accounts and identities are keyed by tenant. Records
// of tenant "mallory" that name tenant "acme"'s subject, record ids and
// hold cannot change acme's account: they act on mallory's own account of
// the same name, or wait for a target that exists only in acme's scope.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	pool := s.Pool()
	acme := func(r map[string]any) map[string]any { return clone(r, "tenant_id", "acme") }
	mal := func(r map[string]any) map[string]any { return clone(r, "tenant_id", "mallory") }
	hold := rec("record_id", "h-1", "kind", "hold", "amount", "30", "meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)
	mustSettle(t, s, batch(0, 0, acme(grant("g-1", "cust-1", "100")), acme(rec("record_id", "u-1", "amount", "40")), acme(hold)))
	before := balance(t, pool, "acme", "cust-1", "USD")
	if before != "60" {
		t.Fatalf("acme balance %s, want 60", before)
	}
	rs := mustSettle(t, s, batch(1, 0,
		mal(rec("record_id", "u-1", "amount", "1")), // same record id: mallory's own identity
		mal(signal("refund", "u-1", "cust-1")),      // refunds mallory's u-1, not acme's
		mal(rec("record_id", "c-1", "kind", "correction", "corrects", "u-1", "amount", "0", "finalization_version", 2)), // corrects mallory's chain
		mal(clone(signal("hold_release", "h-1", "cust-1"))),                                                             // acme's hold is not in mallory's scope: waits
		mal(rec("record_id", "u-3", "amount", "5", "hold_id", "h-1")),                                                   // capture of a hold mallory does not have: waits
		mal(grant("g-1", "cust-1", "1000")),                                                                             // mallory's own credits
	))
	t.Logf("mallory's outcomes: %v", outcomes(rs))
	if got := balance(t, pool, "acme", "cust-1", "USD"); got != before {
		t.Errorf("acme balance changed by mallory's records: %s -> %s", before, got)
	}
	var held string
	if err := pool.QueryRow(context.Background(), `SELECT held::text FROM account_states WHERE tenant_id = 'acme' AND subject = 'cust-1'`).Scan(&held); err != nil || held != "30" {
		t.Errorf("acme held = %s, %v; want 30 (its hold untouched)", held, err)
	}
	if n := count(t, pool, `SELECT count(*) FROM ledger_entries l JOIN identities i ON i.id = l.identity_id
	                           JOIN accounts a ON a.id = l.account_id
	                          WHERE i.tenant_id <> a.tenant_id OR l.tenant_id <> a.tenant_id`); n != 0 {
		t.Errorf("%d ledger rows cross a tenant boundary", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM accounts WHERE subject = 'cust-1'`); n != 2 {
		t.Errorf("%d accounts named cust-1, want 2 (one per tenant)", n)
	}
	if got := balance(t, pool, "mallory", "cust-1", "USD"); got != "1000" {
		t.Errorf("mallory balance %s, want 1000 (its grant; its usage corrected to 0)", got)
	}
	if n := count(t, pool, `SELECT count(*) FROM waiting WHERE tenant_id = 'mallory' AND status = 'waiting'`); n != 2 {
		t.Errorf("%d of mallory's operations on acme's hold wait, want 2", n)
	}
	reconcileClean(t, s, reconcile.Input{}, "after the attempt")
	checkInvariants(t, pool)
}
