package retention_test

import (
	"bytes"
	"cmp"
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/relay/outbox"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/retention"
	"github.com/settlehq/settle/settle/settletest"
)

// publishAll marks every outbox row published, as the relay does once the
// broker acknowledged them.
func publishAll(t *testing.T, s *settle.Store) {
	t.Helper()
	ctx := context.Background()
	l, err := outbox.New(s).Lease(ctx, 4242)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close(ctx) }()
	if ok, err := l.TryAcquire(ctx); err != nil || !ok {
		t.Fatalf("outbox lease: %v %v", ok, err)
	}
	ms, err := l.Pending(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	if err := l.MarkPublished(ctx, ids); err != nil {
		t.Fatal(err)
	}
}

// pruneFixture settles a usage record, a conflicting payload of the same
// identity (an open case), a record that cannot be decoded (a dead
// letter), a record of an open period and an exact repeat of the usage
// under other coordinates (offset 4, a delivery_repeats row); publishes
// the outbox and closes 2026-11.
func pruneFixture(t *testing.T, s *settle.Store) message.Result {
	t.Helper()
	ctx := context.Background()
	first := settletest.MustSettle(t, s, settletest.Batch(0, 0, settletest.Rec("record_id", "u-1")))[0]
	if first.Outcome != message.OutcomeSettled {
		t.Fatalf("first delivery: %v", settletest.Outcomes([]message.Result{first}))
	}
	settletest.MustSettle(t, s, settletest.Batch(0, 1, settletest.Rec("record_id", "u-1", "amount", "41", "quantity", "41")))
	settletest.MustSettle(t, s, []message.Input{{Topic: "usage", Partition: 0, Offset: 2, Value: []byte("{not json")}})
	settletest.MustSettle(t, s, settletest.Batch(0, 3, settletest.Rec("record_id", "u-open", "account_period", "2026-12")))
	if dup := settletest.MustSettle(t, s, settletest.Batch(0, 4, settletest.Rec("record_id", "u-1")))[0]; dup.Outcome != message.OutcomeDuplicate {
		t.Fatalf("repeat: %v", settletest.Outcomes([]message.Result{dup}))
	}
	publishAll(t, s)
	if _, err := s.ClosePeriod(ctx, "acme", "2026-11", "test"); err != nil {
		t.Fatal(err)
	}
	return first
}

func prunedCounts(cs []retention.Count) map[string]int64 {
	m := map[string]int64{}
	for _, c := range cs {
		m[c.Table] = c.Rows
	}
	return m
}

// TestPruneThenRedeliverIsDuplicate: settle prune removes the repeated
// deliveries of a closed period (not a quarantine's while its case is
// open), the published outbox rows and the old dead letters, keeps every
// identity, ledger row and case, and a redelivery of the record whose
// delivery row it removed is still answered duplicate with the stored
// response (nothing settles twice). It runs on both layouts.
// Seen failing with a prune that also removed identities.
func TestPruneThenRedeliverIsDuplicate(t *testing.T) {
	t.Parallel()
	onEachLayout(t, func(t *testing.T, s *settle.Store) {
		pool := s.Pool()
		first := pruneFixture(t, s)
		kept := func() [4]int {
			return [4]int{settletest.Count(t, pool, `SELECT count(*) FROM identities`), settletest.Count(t, pool, `SELECT count(*) FROM ledger_entries`),
				settletest.Count(t, pool, `SELECT count(*) FROM conflict_cases`), settletest.Count(t, pool, `SELECT count(*) FROM accounts`)}
		}
		before := kept()
		ctx := context.Background()
		opts := retention.Options{DeadLettersBefore: time.Now().Add(time.Hour), DryRun: true}
		dry, err := retention.New(s).Prune(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		// Repeats: the exact repeat at offset 4 (2026-11, closed); not
		// the conflicting one's (its case is open). First deliveries
		// are their identities' rows.
		want := map[string]int64{"delivery_repeats": 1, "dead_letters": 1, "outbox": int64(settletest.Count(t, pool, `SELECT count(*) FROM outbox_messages`)), "webhook_deliveries": 0}
		if got := prunedCounts(dry); !maps.Equal(got, want) {
			t.Fatalf("dry run counts %v, want %v", got, want)
		}
		if n := settletest.Count(t, pool, `SELECT count(*) FROM delivery_repeats`); n != 2 {
			t.Fatalf("a dry run removed rows: %d delivery repeats left of 2", n)
		}
		opts.DryRun = false
		done, err := retention.New(s).Prune(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := prunedCounts(done); !maps.Equal(got, want) {
			t.Fatalf("prune counts %v, want %v", got, want)
		}
		if n := settletest.Count(t, pool, `SELECT count(*) FROM delivery_repeats WHERE case_id IS NOT NULL`); n != 1 ||
			settletest.Count(t, pool, `SELECT count(*) FROM delivery_repeats`) != 1 {
			t.Fatalf("delivery repeats left: want only the open case's")
		}
		if n := settletest.Count(t, pool, `SELECT count(*) FROM outbox_messages`) + settletest.Count(t, pool, `SELECT count(*) FROM dead_letters`); n != 0 {
			t.Fatalf("%d outbox rows and dead letters left, want 0", n)
		}
		if after := kept(); after != before {
			t.Fatalf("identities, ledger rows, cases, accounts: %v before prune, %v after", before, after)
		}
		again := settletest.MustSettle(t, s, settletest.Batch(0, 4, settletest.Rec("record_id", "u-1")))[0]
		if again.Outcome != message.OutcomeDuplicate || !bytes.Equal(again.Response, first.Response) {
			t.Fatalf("redelivery after prune: %s %s, want duplicate with the stored response %s", again.Outcome, again.Response, first.Response)
		}
		if after := kept(); after != before {
			t.Fatalf("the redelivery changed identities, ledger rows, cases, accounts: %v -> %v", before, after)
		}
		settletest.CheckInvariants(t, pool)
	})
}

// TestPruneGuard: the append-only guard lets a DELETE through only inside
// settle_prune. The service role, which may EXECUTE it, cannot DELETE the
// same rows itself; the owner's plain DELETE is refused by the triggers;
// and an identity, a ledger row or a case cannot be deleted even with the
// function's setting forged.
// Seen failing with a guard that did not check the setting.
func TestPruneGuard(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	pool := s.Pool()
	pruneFixture(t, s)
	ctx := context.Background()
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
			t.Errorf("%s as %q: %v, want refused (42501)", stmt, cmp.Or(role, "owner"), err)
		}
	}
	for _, table := range []string{"delivery_repeats", "outbox", "outbox_settlements", "dead_letters", "webhook_deliveries", "outbox_parked", "prune_runs",
		"identities", "ledger_entries", "conflict_cases", "case_resolutions", "accounts", "chains", "holds", "waiting"} {
		refused("settle_app", `DELETE FROM `+table)
	}
	// Tables with rows (a row trigger does not fire on none).
	for _, table := range []string{"delivery_repeats", "outbox", "outbox_settlements", "dead_letters", "identities", "ledger_entries", "conflict_cases"} {
		refused("", `DELETE FROM `+table)
		// The owner forging the function's setting still cannot touch
		// history.
		if table != "delivery_repeats" && table != "outbox" && table != "outbox_settlements" && table != "dead_letters" {
			refused("", `SELECT set_config('settle.pruning', 'on', true); DELETE FROM `+table)
		}
	}
	// settle_app prunes through the function, and nothing else goes.
	before := [3]int{settletest.Count(t, pool, `SELECT count(*) FROM identities`), settletest.Count(t, pool, `SELECT count(*) FROM ledger_entries`),
		settletest.Count(t, pool, `SELECT count(*) FROM conflict_cases`)}
	app := appPool(t, pool)
	var removed int64
	if err := app.QueryRow(ctx, `SELECT sum(rows) FROM settle_prune(now() + interval '1 hour', false)`).Scan(&removed); err != nil {
		t.Fatalf("settle_prune as settle_app: %v", err)
	}
	if removed == 0 {
		t.Fatal("settle_prune as settle_app removed nothing")
	}
	after := [3]int{settletest.Count(t, pool, `SELECT count(*) FROM identities`), settletest.Count(t, pool, `SELECT count(*) FROM ledger_entries`),
		settletest.Count(t, pool, `SELECT count(*) FROM conflict_cases`)}
	if before != after {
		t.Fatalf("identities, ledger rows, cases: %v before settle_prune, %v after", before, after)
	}
	var setting string
	if err := app.QueryRow(ctx, `SELECT coalesce(current_setting('settle.pruning', true), '')`).Scan(&setting); err != nil || setting == "on" {
		t.Fatalf("settle.pruning after the function: %q %v, want it cleared", setting, err)
	}
}

// appPool is a pool on the same database whose sessions run as settle_app.
func appPool(t *testing.T, pool *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	return settletest.AppPoolOn(t, pool.Config().ConnString(), 2)
}

// TestPruneReplayedDeadLetters: a dead letter recorded as replayed is
// removed by a prune without an age limit, with its replay rows (the dead
// letter is its record's delivery); one not replayed stays.
func TestPruneReplayedDeadLetters(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	pool := s.Pool()
	ctx := context.Background()
	settletest.MustSettle(t, s, []message.Input{{Topic: "usage", Partition: 0, Offset: 0, Value: []byte("{not json")},
		{Topic: "usage", Partition: 0, Offset: 1, Value: []byte("{nor this")}})
	replayedID := settletest.Count(t, pool, `SELECT id FROM dead_letters WHERE "offset" = 0`)
	if err := retention.New(s).DeadLettersReplayed(ctx, []int64{int64(replayedID)}, []message.Coordinates{{Topic: "usage", Partition: 0, Offset: 7}}); err != nil {
		t.Fatal(err)
	}
	cs, err := retention.New(s).Prune(ctx, retention.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := prunedCounts(cs); got["dead_letters"] != 1 {
		t.Fatalf("prune counts %v, want the replayed dead letter", got)
	}
	if n := settletest.Count(t, pool, `SELECT count(*) FROM dead_letters WHERE "offset" = 1`); n != 1 {
		t.Fatalf("the dead letter not replayed is gone")
	}
	if n := settletest.Count(t, pool, `SELECT count(*) FROM dead_letter_replays`) + settletest.Count(t, pool, `SELECT count(*) FROM dead_letters WHERE "offset" = 0`); n != 0 {
		t.Fatalf("%d rows of the replayed dead letter left", n)
	}
}

// TestPruneKeepsEditedLetters: a dead letter an analyst corrected and
// resent is kept by settle prune with the row saying where its record
// went, past any age, as its edit is: the audit of a correction names its
// letter and its destination. A letter replayed unedited is removed, as
// is one older than the cut. Seen failing before migration 26: the
// edited letter and its replay row were removed by the next prune.
func TestPruneKeepsEditedLetters(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	pool := s.Pool()
	ctx := context.Background()
	settletest.MustSettle(t, s, []message.Input{{Topic: "usage", Partition: 0, Offset: 0, Value: []byte("{not json")},
		{Topic: "usage", Partition: 0, Offset: 1, Value: []byte("{nor this")}, {Topic: "usage", Partition: 0, Offset: 2, Value: []byte("{old")}})
	letter := func(offset int) int64 {
		return int64(settletest.Count(t, pool, `SELECT id FROM dead_letters WHERE "offset" = $1`, offset))
	}
	edited, replayed := letter(0), letter(1)
	r := retention.New(s)
	if _, err := r.Resend(ctx, retention.Edit{DeadLetterID: edited, Diff: []byte(`[]`), Value: []byte(`{}`), By: "alice", Reason: "fixed the json"},
		func(context.Context, int64) (message.Coordinates, error) {
			return message.Coordinates{Topic: "usage", Partition: 0, Offset: 7}, nil
		}); err != nil {
		t.Fatal(err)
	}
	if err := r.DeadLettersReplayed(ctx, []int64{replayed}, []message.Coordinates{{Topic: "usage", Partition: 0, Offset: 8}}); err != nil {
		t.Fatal(err)
	}
	cs, err := r.Prune(ctx, retention.Options{DeadLettersBefore: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got := prunedCounts(cs); got["dead_letters"] != 2 {
		t.Errorf("prune counts %v, want the replayed and the old dead letter", got)
	}
	if n := settletest.Count(t, pool, `SELECT count(*) FROM dead_letters WHERE id = $1`, edited); n != 1 {
		t.Errorf("the edited dead letter is gone")
	}
	if n := settletest.Count(t, pool, `SELECT count(*) FROM dead_letter_replays WHERE dead_letter_id = $1 AND "offset" = 7 AND edit_id IS NOT NULL`, edited); n != 1 {
		t.Errorf("where the edited letter's record went is gone")
	}
	if n := settletest.Count(t, pool, `SELECT count(*) FROM dead_letters WHERE id <> $1`, edited); n != 0 {
		t.Errorf("%d dead letters not edited left", n)
	}
}

// onEachLayout runs f in parallel on a store over plain tables and on one
// over the partitioned layout (settle migrate --hash-partitions).
func onEachLayout(t *testing.T, f func(t *testing.T, s *settle.Store)) {
	for _, layout := range []struct {
		name string
		url  func(testing.TB) string
	}{{"plain", settletest.NewDatabase}, {"partitioned", settletest.NewPartitionedDatabase}} {
		t.Run(layout.name, func(t *testing.T) {
			t.Parallel()
			f(t, settletest.NewStoreOn(t, layout.url(t), settle.Config{}))
		})
	}
}
