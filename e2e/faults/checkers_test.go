package faults

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/settle/settletest"
)

// TestCheckersCatchBrokenState shows every invariant checker failing once:
// after a clean run, it breaks the state the way a defect would — a second
// ledger row for one identity, a lost delivery row, a cached balance that
// no longer equals its rows, a Kafka offset committed ahead of PostgreSQL
// (what committing before the transaction leaves behind), an outbox row
// not published, a model that disagrees — checks that Check (reconcile,
// underneath) reports exactly that, and repairs it.
func TestCheckersCatchBrokenState(t *testing.T) {
	t.Parallel()
	r := newRig(t, 5, 1)
	r.produce(400)
	r.drain()
	ctx := context.Background()
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// Superuser, bypassing the append-only triggers: a corruption only a
	// defect (or an operator) could cause.
	exec := func(sql string, args ...any) { t.Helper(); settletest.Bypass(t, conn, sql, args...) }
	want := r.wl.Model().Accounts()
	expect := func(what string, bad func(Report) bool) {
		t.Helper()
		rep, err := Check(ctx, r.tg, true, want)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() || !bad(rep) {
			t.Fatalf("%s: the checker did not catch it: %s", what, rep)
		}
		t.Logf("CAUGHT %s: %s", what, rep)
	}

	// One effect per identity: a second ledger row for a settled identity.
	var entryID, accountID int64
	if err := conn.QueryRow(ctx, `INSERT INTO ledger_entries (id, identity_id, account_id, tenant_id, bucket, amount)
		SELECT (SELECT max(n.id) + 1 FROM ledger_entries n WHERE n.tenant_id = e.tenant_id AND n.account_id = e.account_id),
		       identity_id, account_id, tenant_id, bucket, amount
		  FROM ledger_entries e WHERE bucket = 'balance' ORDER BY identity_id DESC, id DESC LIMIT 1 RETURNING id, account_id`).Scan(&entryID, &accountID); err != nil {
		t.Fatal(err)
	}
	expect("double effect", func(r Report) bool { return r.DoubleEffects > 0 })
	exec(`DELETE FROM ledger_entries WHERE account_id = $1 AND id = $2`, accountID, entryID)

	// One delivery per input: a first delivery's record lost (its
	// identity no longer names the input record that claimed it).
	var lostID int64
	if err := conn.QueryRow(ctx, `SELECT identity_id FROM deliveries WHERE "offset" = 3 AND outcome = 'settled' LIMIT 1`).Scan(&lostID); err != nil {
		t.Fatal(err)
	}
	exec(`UPDATE identities SET topic = '' WHERE id = $1`, lostID)
	expect("lost record", func(r Report) bool { return r.Lost == 1 && r.Gaps == 1 })
	exec(`UPDATE identities SET topic = 'usage' WHERE id = $1`, lostID)

	// Balances equal rows (and the model): an account's balance (its
	// newest ledger row's) moved.
	newest := `(SELECT account_id, max(id) FROM ledger_entries WHERE seq IS NOT NULL AND account_id = (SELECT min(id) FROM accounts) GROUP BY account_id)`
	exec(`UPDATE ledger_entries SET balance_after = balance_after + 1 WHERE (account_id, id) = ` + newest)
	expect("balance not equal to its rows", func(r Report) bool { return r.BalanceMismatch == 1 && r.ModelMismatch == 1 })
	exec(`UPDATE ledger_entries SET balance_after = balance_after - 1 WHERE (account_id, id) = ` + newest)

	// Kafka offsets not ahead of PostgreSQL's: the group commits an offset
	// the database has not reached, as a consumer that commits before its
	// transaction would after a crash.
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.broker.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	committed, _, err := kafkaOffsets(ctx, r.broker.Brokers, "settle", "usage")
	if err != nil {
		t.Fatal(err)
	}
	commit := func(o int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.AddOffset("usage", 0, o, -1)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := adm.CommitAllOffsets(cctx, "settle", os); err != nil {
			t.Fatal(err)
		}
	}
	commit(committed[0] + 5)
	expect("kafka offset ahead of postgres", func(r Report) bool { return r.OffsetsAhead == 1 })
	commit(committed[0])

	// Every outbox row published (final): a settlement put back on the
	// relay's queue, as a relay that lost its mark would leave it (on its
	// row's queue row, keyed by the row).
	var outboxID int64
	if err := conn.QueryRow(ctx, `INSERT INTO outbox_queue (tenant_id, id, ids)
		SELECT tenant_id, id, ARRAY[ids[cardinality(ids)]] FROM outbox_settlements ORDER BY id DESC LIMIT 1 RETURNING id`).Scan(&outboxID); err != nil {
		t.Fatal(err)
	}
	expect("outbox row not published", func(r Report) bool { return r.Unpublished == 1 })
	exec(`DELETE FROM outbox_queue WHERE id = $1`, outboxID)

	// The model: an account that disagrees with the workload's model by
	// one cent (the model's balance, the database's untouched).
	if len(want) == 0 {
		t.Fatal("no account in the model: the model checker was not exercised")
	}
	want[0].Balance++
	expect("balance not equal to the model", func(r Report) bool { return r.ModelMismatch == 1 && r.BalanceMismatch == 0 })
	want[0].Balance--
	// Every corruption repaired: the checkers agree again.
	r.check(true)
}
