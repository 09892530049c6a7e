package retention_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/canary"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/reconcile"
	"github.com/settlehq/settle/settle/retention"
	"github.com/settlehq/settle/settle/schema"
	"github.com/settlehq/settle/settle/settletest"
)

// canaryRec is a canary record of one day's account (canary.Subject).
func canaryRec(tenant, subject, id string, kv ...any) map[string]any {
	return settletest.Clone(settletest.Rec("tenant_id", tenant, "subject", subject, "record_id", id, "amount", "0.01", "quantity", "1"), kv...)
}

// settleDay settles, for tenant on subject, what a canary run leaves: a
// usage record and its duplicate (a delivery_repeats row), a conflicting
// payload for another subject (a case, rejected as the service does), and
// a correction and a refund of another usage record.
func settleDay(t *testing.T, s *settle.Store, tenant, subject string, offset int64) {
	t.Helper()
	u := canaryRec(tenant, subject, subject+"-same")
	charged := canaryRec(tenant, subject, subject+"-charged")
	rs := settletest.MustSettle(t, s, settletest.Batch(0, offset, u, u, charged,
		canaryRec(tenant, subject, subject+"-correction", "kind", "correction", "corrects", subject+"-charged", "amount", "0.02", "quantity", "2",
			"finalization_version", 2)))
	if got := strings.Join(settletest.Outcomes(rs), ","); got != "settled,duplicate,settled,settled" {
		t.Fatalf("%s %s: %s", tenant, subject, got)
	}
	rs = settletest.MustSettle(t, s, settletest.Batch(1, offset, canaryRec(tenant, subject, subject+"-charged", "kind", "refund", "amount", nil,
		"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil),
		canaryRec(tenant, subject+"-other", subject+"-same")))
	if rs[0].Outcome != message.OutcomeSettled || rs[1].Outcome != message.OutcomeQuarantined || rs[1].CaseID == 0 {
		t.Fatalf("%s %s refund and conflict: %v", tenant, subject, settletest.Outcomes(rs))
	}
	if _, err := s.Resolve(context.Background(), settle.ResolveRequest{CaseID: rs[1].CaseID, Decision: "reject", Reason: "canary", By: tenant}); err != nil {
		t.Fatal(err)
	}
}

// tenantRows is every row of every per-tenant table whose tenant_id is
// (canary false: is not) the canary's, as text, by table.
func tenantRows(t *testing.T, s *settle.Store, canaryRows bool) map[string]string {
	t.Helper()
	op := "<>"
	if canaryRows {
		op = "="
	}
	out := map[string]string{}
	for _, table := range schema.TenantTables {
		var rows string
		q := fmt.Sprintf(`SELECT count(*) || ':' || coalesce(md5(string_agg(x::text, ',' ORDER BY x::text)), '') FROM %s x WHERE tenant_id %s $1`, table, op)
		if err := s.Pool().QueryRow(context.Background(), q, canary.Tenant).Scan(&rows); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		out[table] = rows
	}
	return out
}

// TestPruneCanaryHistory: settle prune's canary retention removes the
// canary tenant's whole accounts with nothing as new as the cutoff (a
// day's account and its conflict's other account, with their identities,
// ledger rows, chains, cases, resolutions, repeated deliveries and
// published messages), keeps the canary's newer day whole, and leaves
// every row of every other tenant as it was, lookalike tenants
// (settle-canary-2, Settle-Canary) included. A dry run removes nothing.
// What stays passes reconcile, a redelivery of the kept day is still a
// duplicate, and reconcile of the canary's period does not report its
// pruned records on the topics as missing. It runs on both layouts.
// Seen failing with a reconcile that did not know of the canary's
// retention (its period's comparison with the usage topic reported the
// pruned record).
func TestPruneCanaryHistory(t *testing.T) {
	t.Parallel()
	onEachLayout(t, func(t *testing.T, s *settle.Store) {
		pool := s.Pool()
		ctx := context.Background()
		pruneFixture(t, s) // acme: a case, a dead letter, a repeat
		old, kept := canary.Subject(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)), canary.Subject(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
		settleDay(t, s, canary.Tenant, old, 100)
		for i, lookalike := range []string{"settle-canary-2", "Settle-Canary", "acme"} {
			settleDay(t, s, lookalike, old, 200+10*int64(i))
		}
		publishAll(t, s)
		var cutoff time.Time
		if err := pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&cutoff); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		settleDay(t, s, canary.Tenant, kept, 300)
		settleDay(t, s, "settle-canary-2", kept, 400)
		publishAll(t, s)
		// The operational history every prune removes goes first, so
		// that what the canary's retention removes is all that changes.
		if _, err := retention.New(s).Prune(ctx, retention.Options{}); err != nil {
			t.Fatal(err)
		}
		keptIDs := settletest.Count(t, pool, `SELECT count(*) FROM identities WHERE tenant_id = $1 AND subject LIKE $2 || '%'`, canary.Tenant, kept)
		others := tenantRows(t, s, false)
		canaryBefore := tenantRows(t, s, true)

		opts := retention.Options{CanaryBefore: cutoff, DryRun: true}
		dry, err := retention.New(s).Prune(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		// The old day: 5 identities (same, charged, correction, refund,
		// and the conflict's case on same), 4 ledger rows, 2 accounts.
		want := map[string]int64{"canary_accounts": 2, "canary_identities": 4, "canary_ledger_entries": 4, "canary_chains": 1,
			"canary_conflict_cases": 1, "canary_case_resolutions": 1}
		got := prunedCounts(dry)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("dry run %s = %d, want %d (all: %v)", k, got[k], v, got)
			}
		}
		if after := tenantRows(t, s, true); !maps.Equal(after, canaryBefore) {
			t.Fatalf("a dry run removed canary rows: %v -> %v", canaryBefore, after)
		}
		opts.DryRun = false
		done, err := retention.New(s).Prune(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if g := prunedCounts(done); !maps.Equal(g, got) {
			t.Errorf("prune counts %v, dry run's %v", g, got)
		}
		if after := tenantRows(t, s, false); !maps.Equal(after, others) {
			for k := range others {
				if after[k] != others[k] {
					t.Errorf("%s: other tenants' rows changed: %s -> %s", k, others[k], after[k])
				}
			}
		}
		if n := settletest.Count(t, pool, `SELECT count(*) FROM accounts WHERE tenant_id = $1 AND subject LIKE $2 || '%'`, canary.Tenant, old); n != 0 {
			t.Errorf("%d accounts of the old day left", n)
		}
		if n := settletest.Count(t, pool, `SELECT count(*) FROM identities WHERE tenant_id = $1`, canary.Tenant); n != keptIDs {
			t.Errorf("%d canary identities left, want the kept day's %d", n, keptIDs)
		}
		for _, q := range []string{`SELECT count(*) FROM ledger_entries l WHERE tenant_id = $1 AND NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = l.account_id)`,
			`SELECT count(*) FROM conflict_cases c WHERE tenant_id = $1 AND NOT EXISTS (SELECT 1 FROM identities i WHERE i.id = c.identity_id)`,
			`SELECT count(*) FROM outbox_messages m WHERE tenant_id = $1 AND settlement_id IS NULL`,
			`SELECT count(*) FROM delivery_repeats d WHERE tenant_id = $1 AND NOT EXISTS (SELECT 1 FROM identities i WHERE i.id = d.identity_id)`} {
			if n := settletest.Count(t, pool, q, canary.Tenant); n != 0 {
				t.Errorf("%d canary rows left behind: %s", n, q)
			}
		}
		settletest.CheckInvariants(t, pool)
		rep, err := reconcile.Run(ctx, s, reconcile.Input{})
		if err != nil || !rep.Clean() {
			t.Fatalf("reconcile after the canary's prune: %v %+v", err, rep)
		}
		// The canary's period against the topics: the old day's
		// record is on the usage topic, its identity gone.
		rep, err = reconcile.Run(ctx, s, reconcile.Input{TenantID: canary.Tenant, Period: "2026-11", SourceRead: true, SourceTopic: "usage",
			Source: []reconcile.SourceRecord{{Source: message.Coordinates{Topic: "usage", Partition: 0, Offset: 100}, RecordID: old + "-same", Operation: "usage"}}})
		if err != nil || !rep.Clean() {
			t.Fatalf("reconcile of the canary's period after its prune: %v %+v", err, rep)
		}
		again := settletest.MustSettle(t, s, settletest.Batch(0, 500, canaryRec(canary.Tenant, kept, kept+"-same")))[0]
		if again.Outcome != message.OutcomeDuplicate {
			t.Fatalf("redelivery of the kept day: %s, want duplicate", again.Outcome)
		}
	})
}

// TestPruneCanaryGuard: only the canary tenant's history rows can be
// deleted, and only inside settle_prune_canary: the owner forging its
// setting still cannot delete another tenant's identity, ledger row, case
// or resolution; settle_app cannot delete them at all, and may run the
// function, which removes nothing of another tenant.
// Seen failing with a guard that did not check the row's tenant.
func TestPruneCanaryGuard(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	pool := s.Pool()
	ctx := context.Background()
	subject := canary.Subject(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	settleDay(t, s, "acme", subject, 0)
	settleDay(t, s, canary.Tenant, subject, 100)
	publishAll(t, s)
	others := tenantRows(t, s, false)
	refused := func(role, stmt string) {
		t.Helper()
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if role != "" {
				if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+role); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, stmt)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "42501") {
			t.Errorf("%s as %q: %v, want refused (42501)", stmt, role, err)
		}
	}
	for _, table := range []string{"identities", "ledger_entries", "conflict_cases", "case_resolutions"} {
		forged := `SELECT set_config('settle.pruning_canary', 'on', true), set_config('settle.pruning', 'on', true); `
		refused("", forged+`DELETE FROM `+table+` WHERE tenant_id = 'acme'`)
		refused("", `DELETE FROM `+table+` WHERE tenant_id = '`+canary.Tenant+`'`)
		refused("settle_app", `DELETE FROM `+table+` WHERE tenant_id = '`+canary.Tenant+`'`)
	}
	app := appPool(t, pool)
	var removed int64
	if err := app.QueryRow(ctx, `SELECT sum(rows) FROM settle_prune_canary(now() + interval '1 hour', false)`).Scan(&removed); err != nil {
		t.Fatalf("settle_prune_canary as settle_app: %v", err)
	}
	if removed == 0 {
		t.Fatal("settle_prune_canary as settle_app removed nothing")
	}
	if after := tenantRows(t, s, false); !maps.Equal(after, others) {
		t.Fatalf("other tenants' rows changed: %v -> %v", others, after)
	}
	if n := settletest.Count(t, pool, `SELECT count(*) FROM identities WHERE tenant_id = $1`, canary.Tenant); n != 0 {
		t.Fatalf("%d canary identities left by a cutoff after them all", n)
	}
}

// TestPruneCanaryUnderARunningStore: a process that settled on the day's
// two canary accounts (one with a ledger row, one created by the
// quarantined copy) before the canary's retention removed them settles a
// later record of each on an account that exists, not on a removed id.
// Its account cache was written when no account was ever deleted; this
// guards that assumption for the canary. Not seen failing: the store
// already handles it (a guard, not a fix).
func TestPruneCanaryUnderARunningStore(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	pool := s.Pool()
	ctx := context.Background()
	day := canary.Subject(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	settletest.MustSettle(t, s, settletest.Batch(0, 0, canaryRec(canary.Tenant, day, "c")))
	if r := settletest.MustSettle(t, s, settletest.Batch(1, 0, canaryRec(canary.Tenant, day+"-other", "c")))[0]; r.Outcome != message.OutcomeQuarantined {
		t.Fatalf("conflicting copy: %s", r.Outcome)
	}
	publishAll(t, s)
	var removed int64
	if err := pool.QueryRow(ctx, `SELECT rows FROM settle_prune_canary(now() + interval '1 hour', false) WHERE table_name = 'accounts'`).Scan(&removed); err != nil || removed != 2 {
		t.Fatalf("prune: %d accounts removed, %v; want 2", removed, err)
	}
	for i, subject := range []string{day + "-other", day} {
		if r := settletest.MustSettle(t, s, settletest.Batch(2, int64(i), canaryRec(canary.Tenant, subject, "later-"+subject)))[0]; r.Outcome != message.OutcomeSettled {
			t.Fatalf("a later record of %s: %s", subject, r.Outcome)
		}
	}
	if n := settletest.Count(t, pool, `SELECT count(*) FROM ledger_entries l WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = l.account_id)`); n != 0 {
		t.Fatalf("%d ledger rows name a removed account", n)
	}
	settletest.CheckInvariants(t, pool)
}
