package reconcile_test

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/reconcile"
	"github.com/settlehq/settle/settle/settletest"
)

// reconcileFixture settles a small mixed history (grants, usage, a hold
// and its capture, a correction, a refund) for tenant acme, period 2026-11,
// marks the outbox published as a relay would, and returns the store and
// what the usage and settlements topics would hold.
func reconcileFixture(t *testing.T) (*settle.Store, []reconcile.SourceRecord, []reconcile.PublishedSettlement) {
	t.Helper()
	s := settletest.NewStore(t, settle.Config{})
	recs := []map[string]any{
		settletest.Grant("g-1", "cust-1", "100"),
		settletest.Rec("record_id", "u-1", "amount", "40"),
		settletest.Rec("record_id", "h-1", "kind", "hold", "amount", "10", "meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil),
		settletest.Rec("record_id", "u-2", "amount", "7", "hold_id", "h-1"),
		settletest.Rec("record_id", "c-1", "kind", "correction", "corrects", "u-1", "amount", "30", "finalization_version", 2),
		settletest.Signal("refund", "u-2", "cust-1"),
		settletest.Grant("g-2", "cust-2", "5"),
	}
	ins := settletest.Batch(0, 0, recs...)
	rs := settletest.MustSettle(t, s, ins)
	for i, r := range rs {
		if r.Outcome != settle.OutcomeSettled {
			t.Fatalf("fixture record %d: %s %s", i, r.Outcome, r.Reason)
		}
	}
	var source []reconcile.SourceRecord
	for i, r := range rs {
		source = append(source, reconcile.SourceRecord{Source: settle.Coordinates{Topic: "usage", Partition: 0, Offset: ins[i].Offset},
			RecordID: r.Identity.RecordID, Operation: r.Identity.Operation})
	}
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, `DELETE FROM outbox_queue`); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Pool().Query(ctx, `SELECT id, value FROM outbox_messages WHERE topic = 'settlements' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var published []reconcile.PublishedSettlement
	for rows.Next() {
		var (
			id    int64
			value []byte
			resp  settle.Response
		)
		if err := rows.Scan(&id, &value); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(value, &resp); err != nil {
			t.Fatal(err)
		}
		published = append(published, reconcile.PublishedSettlement{SettlementID: resp.SettlementID, RecordID: resp.Identity.RecordID,
			Operation: resp.Identity.Operation, Source: settle.Coordinates{Topic: "settlements", Offset: id}})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(published) < 6 {
		t.Fatalf("fixture: %d settlements in the outbox, want at least 6", len(published))
	}
	return s, source, published
}

func runReconcile(t *testing.T, s *settle.Store, in reconcile.Input) *reconcile.Report {
	t.Helper()
	if in.Group == "" {
		in.Group = "g"
	}
	r, err := reconcile.Run(context.Background(), s, in)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return r
}

func classes(r *reconcile.Report) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Class)
	}
	sort.Strings(out)
	return out
}

func full(source []reconcile.SourceRecord, published []reconcile.PublishedSettlement) reconcile.Input {
	return reconcile.Input{TenantID: "acme", Period: "2026-11", SourceTopic: "usage",
		Source: source, SourceRead: true, Published: published, PublishedRead: true,
		KafkaOffsets: map[string]map[int32]int64{"usage": {0: int64(len(source))}}}
}

// TestReconcileClean: a clean history reports nothing, every check runs.
func TestReconcileClean(t *testing.T) {
	t.Parallel()
	s, source, published := reconcileFixture(t)
	r := runReconcile(t, s, full(source, published))
	if !r.Clean() {
		t.Fatalf("clean run found %v: %+v", classes(r), r.Findings)
	}
	for _, c := range r.Checks {
		if c.Skipped != "" {
			t.Errorf("check %s skipped: %s", c.Name, c.Skipped)
		}
	}
	if len(r.Checks) != 13 {
		t.Errorf("%d checks ran, want 13: %+v", len(r.Checks), r.Checks)
	}
}

// TestReconcileFindsInjectedDiscrepancies: each discrepancy injected behind
// the service's back is found, with its class, and nothing else is.
func TestReconcileFindsInjectedDiscrepancies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		inject func(t *testing.T, s *settle.Store, in *reconcile.Input)
		want   []string
	}{
		{"outbox row un-marked", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			settletest.Bypass(t, s.Pool(), `UPDATE outbox SET created_at = now() - interval '1 hour'
			               WHERE id = (SELECT min(id) FROM outbox WHERE topic = 'settlements')`)
			exec(t, s, `INSERT INTO outbox_queue (tenant_id, id) SELECT tenant_id, id FROM outbox WHERE id = (SELECT min(id) FROM outbox WHERE topic = 'settlements')`)
		}, []string{reconcile.ClassOutboxUnpublished}},
		{"settlement parked: the broker refused it for good", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			// What the relay does with a row the broker refuses for good:
			// off the queue, into the parked rows. It is reported as
			// parked, with its reason, and as nothing else (neither
			// unpublished nor missing from the topic).
			exec(t, s, `INSERT INTO outbox_parked (tenant_id, id, reason, error)
			            SELECT tenant_id, id, 'message_too_large', 'MESSAGE_TOO_LARGE' FROM outbox
			             WHERE id = (SELECT max(id) FROM outbox WHERE topic = 'settlements')`)
			in.Published = in.Published[:len(in.Published)-1]
		}, []string{reconcile.ClassOutboxParked}},
		{"settlement never written (outbox row deleted)", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			settletest.Bypass(t, s.Pool(), `DELETE FROM outbox WHERE id = (SELECT max(id) FROM outbox WHERE topic = 'settlements')`)
			// The topic then lacks it too.
			in.Published = in.Published[:len(in.Published)-1]
		}, []string{reconcile.ClassSettlementMissing}},
		{"settlement missing from the topic", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			in.Published = in.Published[1:]
		}, []string{reconcile.ClassSettlementNotOnTopic}},
		{"settlement on the topic with no identity", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			in.Published = append(in.Published, reconcile.PublishedSettlement{SettlementID: "f00d", RecordID: "ghost", Operation: "usage"})
		}, []string{reconcile.ClassSettlementNoIdentity}},
		{"ledger row inserted by a superuser, triggers and keys bypassed", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			settletest.Bypass(t, s.Pool(), `INSERT INTO ledger_entries (identity_id, account_id, tenant_id, bucket, amount)
			               SELECT 999999, id, tenant_id, 'balance', 25 FROM accounts WHERE subject = 'cust-1'`)
		}, []string{reconcile.ClassBalanceMismatch, reconcile.ClassLedgerNoIdentity, reconcile.ClassChainBroken}},
		{"delivery naming an identity that does not exist", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			exec(t, s, `INSERT INTO delivery_repeats (topic, partition, "offset", tenant_id, identity_id, outcome)
			            VALUES ('elsewhere', 0, 1, 'acme', 999999, 'duplicate')`)
		}, []string{reconcile.ClassDeliveryNoIdentity}},
		{"identity naming an account and a root that do not exist", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			settletest.Bypass(t, s.Pool(), `UPDATE identities SET account_id = 999999 WHERE id = (SELECT min(id) FROM identities WHERE account_id IS NOT NULL);
				UPDATE identities SET root_id = 999999 WHERE id = (SELECT max(id) FROM identities WHERE root_id IS NOT NULL);`)
		}, []string{reconcile.ClassIdentityNoAccount, reconcile.ClassIdentityRefMissing}},
		{"second effect for a settled identity", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			exec(t, s, `INSERT INTO ledger_entries (identity_id, account_id, tenant_id, bucket, amount, created_at)
			            SELECT identity_id, account_id, tenant_id, bucket, amount, created_at + interval '1 second'
			              FROM ledger_entries WHERE id = (SELECT min(id) FROM ledger_entries)`)
		}, []string{reconcile.ClassBalanceMismatch, reconcile.ClassEffectRepeated, reconcile.ClassChainBroken}},
		{"ledger row amount changed and the cache adjusted to hide it", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			// A superuser edits history and the cached balance together:
			// only the hash chain notices.
			settletest.Bypass(t, s.Pool(), `UPDATE ledger_entries SET amount = amount - 1 WHERE id = (SELECT min(id) FROM ledger_entries);
				UPDATE accounts SET balance = balance - 1 WHERE id = (SELECT account_id FROM ledger_entries ORDER BY id LIMIT 1);`)
		}, []string{reconcile.ClassChainBroken}},
		{"newest ledger row removed and the cache adjusted to hide it", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			settletest.Bypass(t, s.Pool(), `UPDATE accounts a SET balance = a.balance - e.amount FROM ledger_entries e
				 WHERE e.id = (SELECT max(id) FROM ledger_entries WHERE bucket = 'balance') AND a.id = e.account_id;
				DELETE FROM ledger_entries WHERE id = (SELECT max(id) FROM ledger_entries WHERE bucket = 'balance');`)
		}, []string{reconcile.ClassChainHeadMismatch}},
		{"cached balance edited", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			exec(t, s, `UPDATE accounts SET balance = balance + 1 WHERE subject = 'cust-2'`)
		}, []string{reconcile.ClassBalanceMismatch}},
		{"Kafka offset ahead of PostgreSQL", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			in.KafkaOffsets["usage"][0] += 5
			in.KafkaOffsets["usage"][3] = 2 // a partition PostgreSQL never saw
		}, []string{reconcile.ClassKafkaOffsetAhead, reconcile.ClassKafkaOffsetAhead}},
		{"usage record passed over", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			// A record of the tenant and period behind the group's offset
			// with no delivery: the group moved past it without settling.
			exec(t, s, `UPDATE consumer_offsets SET next_offset = next_offset + 1`)
			in.Source = append(in.Source, reconcile.SourceRecord{Source: settle.Coordinates{Topic: "usage", Offset: int64(len(in.Source))},
				RecordID: "u-lost", Operation: "usage"})
			in.KafkaOffsets["usage"][0]++
		}, []string{reconcile.ClassSourceNotSettled}},
		{"identity whose usage record is not on the topic", func(t *testing.T, s *settle.Store, in *reconcile.Input) {
			in.Source = in.Source[1:]
		}, []string{reconcile.ClassIdentityNoSource}},
	} {
		// Serial: one database at a time keeps the shared server's
		// connections free for the tests running beside this one.
		t.Run(tc.name, func(t *testing.T) {
			s, source, published := reconcileFixture(t)
			in := full(source, published)
			tc.inject(t, s, &in)
			r := runReconcile(t, s, in)
			got := classes(r)
			sort.Strings(tc.want)
			if !equal(got, tc.want) {
				t.Errorf("found %v, want %v:\n%+v", got, tc.want, r.Findings)
			}
			for _, f := range r.Findings {
				if f.Detail == "" {
					t.Errorf("finding %s has no detail", f.Class)
				}
			}
		})
	}
}

// TestReconcileGrace: an unpublished outbox row younger than the grace
// period is the relay's normal work, not a discrepancy.
func TestReconcileGrace(t *testing.T) {
	t.Parallel()
	s, _, _ := reconcileFixture(t)
	exec(t, s, `INSERT INTO outbox_queue (tenant_id, id) SELECT tenant_id, id FROM outbox`)
	if r := runReconcile(t, s, reconcile.Input{}); !r.Clean() {
		t.Errorf("fresh unpublished rows reported: %v", classes(r))
	}
	if r := runReconcile(t, s, reconcile.Input{OutboxGrace: time.Nanosecond}); len(r.Findings) == 0 {
		t.Errorf("unpublished rows past a 1ns grace not reported")
	}
}

func exec(t *testing.T, s *settle.Store, sql string) {
	t.Helper()
	if _, err := s.Pool().Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReconcileCleanAfterPrune: settle prune removes only operational
// history, so a clean history is still clean after it, every check run
// against the topics included: a settlement whose published outbox row was
// pruned is not "missing", and a source record of a closed period whose
// delivery row was pruned is still settled (by its identity).
func TestReconcileCleanAfterPrune(t *testing.T) {
	t.Parallel()
	s, source, published := reconcileFixture(t)
	ctx := context.Background()
	if _, err := s.ClosePeriod(ctx, "acme", "2026-11", "test"); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Prune(ctx, settle.PruneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := settletest.Count(t, s.Pool(), `SELECT count(*) FROM outbox`); n != 0 {
		t.Fatalf("prune %v left %d outbox rows, want 0", cs, n)
	}
	if r := runReconcile(t, s, full(source, published)); !r.Clean() {
		t.Fatalf("after prune: found %v: %+v", classes(r), r.Findings)
	}
}
