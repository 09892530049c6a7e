package settle_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// TestSettleUsageDuplicateConflict: a usage settles; a repeat with the same
// fingerprint (other source, attributes, or amount spelt 40.0) is a
// duplicate; a changed amount is quarantined fingerprint_mismatch; another
// record id with the amount 4E1 settles on its own.
func TestSettleUsageDuplicateConflict(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	pool := s.Pool()
	u1 := rec()
	rs := mustSettle(t, s, batch(0, 0,
		grant("g-1", "cust-1", "100"),
		u1,
		clone(u1, "amount", "40.0", "source", "other", "attributes", map[string]any{"job": "x"}), // same fingerprint
		clone(u1, "amount", "41"), // conflict
		clone(u1, "record_id", "u-2", "amount", "4E1"),
	))
	want := []string{"settled", "settled", "duplicate", "quarantined:fingerprint_mismatch", "settled"}
	if got := outcomes(rs); !reflect.DeepEqual(got, want) {
		t.Fatalf("outcomes = %v, want %v", got, want)
	}
	if !rs[2].Replayed || string(rs[2].Response) != string(rs[1].Response) {
		t.Errorf("duplicate must replay the stored response:\n%s\n%s", rs[2].Response, rs[1].Response)
	}
	var resp message.Response
	if err := json.Unmarshal(rs[4].Response, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.BalanceAfter != "20" || resp.Sequence != 3 || resp.SettlementID == "" {
		t.Errorf("response = %+v, want balance_after 20, sequence 3", resp)
	}
	if b := balance(t, pool, "acme", "cust-1", "USD"); b != "20" {
		t.Errorf("balance = %s, want 20", b)
	}

	// The case holds both payloads and the field diff.
	var stored, incoming, diff string
	err := pool.QueryRow(context.Background(), `SELECT convert_from(stored_canonical, 'UTF8'), convert_from(incoming_canonical, 'UTF8'), diff::text
		FROM conflict_cases WHERE id = $1`, rs[3].CaseID).Scan(&stored, &incoming, &diff)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stored, `"amount":"40"`) || !strings.Contains(incoming, `"amount":"41"`) {
		t.Errorf("case payloads: stored %s incoming %s", stored, incoming)
	}
	if !strings.Contains(diff, `"amount"`) || strings.Contains(diff, `"subject"`) {
		t.Errorf("case diff = %s, want only amount", diff)
	}

	// A later batch: redelivery of the same coordinates repeats the stored
	// results; a retry under new coordinates is a duplicate; the same
	// conflicting payload joins the same case.
	again := mustSettle(t, s, batch(0, 0, grant("g-1", "cust-1", "100"), u1))
	for i, r := range again {
		if !r.Redelivered || r.Outcome != rs[i].Outcome || string(r.Response) != string(rs[i].Response) {
			t.Errorf("redelivery %d = %+v, want the stored result %+v", i, r, rs[i])
		}
	}
	later := mustSettle(t, s, batch(1, 0, u1, clone(u1, "amount", "41"), clone(u1, "amount", "42")))
	if got := outcomes(later); !reflect.DeepEqual(got, []string{"duplicate", "quarantined:fingerprint_mismatch", "quarantined:fingerprint_mismatch"}) {
		t.Fatalf("later outcomes = %v", got)
	}
	if later[1].CaseID != rs[3].CaseID || later[2].CaseID == rs[3].CaseID {
		t.Errorf("case ids: %d %d, first %d: same payload joins its case, another opens a new one", later[1].CaseID, later[2].CaseID, rs[3].CaseID)
	}
	if n := count(t, pool, `SELECT count(*) FROM deliveries`); n != 8 {
		t.Errorf("deliveries = %d, want 8 (one per input record)", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM outbox_messages WHERE topic = 'settlements'`); n != 3 {
		t.Errorf("settlement outbox rows = %d, want 3", n)
	}
	checkInvariants(t, pool)
}

// TestAppendOnlyEnforcedByDatabase: UPDATE, DELETE and TRUNCATE of ledger
// rows, identities, delivery_repeats and outbox rows are refused by the
// database itself, whoever sends them: history is append-only.
func TestAppendOnlyEnforcedByDatabase(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	// The repeat gives delivery_repeats a row, the settlement
	// outbox_settlements one and the record that does not decode (a dead
	// letter) outbox one (a statement that matches no row fires no row
	// trigger).
	ins := append(batch(0, 0, grant("g-1", "c", "5"), grant("g-1", "c", "5")), message.Input{Topic: "usage", Partition: 0, Offset: 2, Value: []byte("{not json")})
	mustSettle(t, s, ins)
	ctx := context.Background()
	for table, column := range map[string]string{"ledger_entries": "tenant_id", "identities": "tenant_id", "delivery_repeats": "tenant_id",
		"outbox": "topic", "outbox_settlements": "topic"} {
		for _, stmt := range []string{
			"UPDATE " + table + " SET " + column + " = 'x'",
			"DELETE FROM " + table,
			"TRUNCATE " + table + " CASCADE",
		} {
			// As the owner (a superuser here): the triggers refuse.
			if _, err := s.Pool().Exec(ctx, stmt); err == nil || !strings.Contains(err.Error(), "append-only") {
				t.Errorf("owner %q: err = %v, want append-only refusal", stmt, err)
			}
			// As the service role: the grants refuse.
			tx, err := s.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "SET LOCAL ROLE settle_app"); err != nil {
				t.Fatal(err)
			}
			_, err = tx.Exec(ctx, stmt)
			if err == nil || !strings.Contains(err.Error(), "permission denied") {
				t.Errorf("settle_app %q: err = %v, want permission denied", stmt, err)
			}
			tx.Rollback(ctx)
		}
	}
}

// TestHashChainVerifiableFromSettlements: a consumer of the settlements
// topic can verify each account's ledger hash chain from the messages
// alone.
func TestHashChainVerifiableFromSettlements(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	hold := rec("kind", "hold", "record_id", "h", "amount", "5", "meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)
	mustSettle(t, s, batch(0, 0, grant("g", "cust-1", "100"), rec("amount", "40"), hold,
		rec("record_id", "k", "hold_id", "h", "amount", "3"),
		rec("kind", "correction", "record_id", "c", "corrects", "u-1", "amount", "30", "finalization_version", 2)))
	rows, err := s.Pool().Query(context.Background(), `SELECT value FROM outbox_messages WHERE topic = 'settlements' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var head []byte
	n := 0
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			t.Fatal(err)
		}
		var m message.Response
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		for _, e := range m.Entries {
			head = message.ChainHash(head, m.Identity.TenantID, m.Subject, m.Currency, m.SettlementID, e.Bucket, e.Amount)
		}
		if got := hex.EncodeToString(head); got != m.ChainHash {
			t.Errorf("settlement %d (%s): chain_hash %s, recomputed %s", n, m.Kind, m.ChainHash, got)
		}
		n++
	}
	if n != 5 {
		t.Errorf("%d settlements, want 5", n)
	}
}

// TestAccountsReplacedUnderTheStore: a Store locks accounts it knows by id;
// when the database loses them (restored from an older backup, emptied),
// the next batch still settles: the Store forgets what it knew and retries.
func TestAccountsReplacedUnderTheStore(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	mustSettle(t, s, batch(0, 0, grant("g-1", "cust-1", "100")))
	// Empty every table behind the Store's back (triggers off: they refuse).
	settletest.Bypass(t, s.Pool(), `TRUNCATE accounts, identities, ledger_entries, delivery_repeats, outbox, consumer_offsets, chains, holds CASCADE`)
	rs := mustSettle(t, s, batch(0, 1, grant("g-2", "cust-1", "5")))
	if got := outcomes(rs); !reflect.DeepEqual(got, []string{"settled"}) {
		t.Fatalf("outcomes = %v, want [settled]", got)
	}
	if b := balance(t, s.Pool(), "acme", "cust-1", "USD"); b != "5" {
		t.Errorf("balance = %s, want 5", b)
	}
}

// TestRedeliveredWaitingRepeatsResponse: a record that waits for its target
// answers with its stored waiting response, and a redelivery of the same
// coordinates (a consumer or an HTTP attempt taking over after a crash)
// repeats that answer, response included, until the operation is applied:
// then a redelivery answers with the final outcome.
func TestRedeliveredWaitingRepeatsResponse(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	corr := rec("kind", "correction", "record_id", "c-w", "corrects", "u-later", "amount", "30", "finalization_version", 2)
	first := mustSettle(t, s, batch(0, 0, corr))
	if first[0].Outcome != "waiting" || len(first[0].Response) == 0 {
		t.Fatalf("first delivery: %+v", first[0])
	}
	again := mustSettle(t, s, batch(0, 0, corr))
	if !again[0].Redelivered || again[0].Outcome != "waiting" {
		t.Fatalf("redelivery: %+v", again[0])
	}
	if string(again[0].Response) != string(first[0].Response) {
		t.Errorf("redelivery repeats the response:\n got %s\nwant %s", again[0].Response, first[0].Response)
	}

	// The target arrives and the correction is applied; a redelivery of the
	// correction's input record now answers with its final outcome and
	// stored response, not with "waiting".
	target := mustSettle(t, s, batch(0, 1, rec("record_id", "u-later", "amount", "10")))
	if target[0].Outcome != "settled" {
		t.Fatalf("target: %+v", target[0])
	}
	var applied string
	if err := s.Pool().QueryRow(context.Background(), `SELECT response::text FROM identities WHERE record_id = 'c-w'`).Scan(&applied); err != nil {
		t.Fatalf("the correction was not applied: %v", err)
	}
	late := mustSettle(t, s, batch(0, 0, corr))
	if !late[0].Redelivered || late[0].Outcome != "settled" || string(late[0].Response) != applied {
		t.Errorf("redelivery after the correction was applied: outcome %s, response %s; want settled, %s", late[0].Outcome, late[0].Response, applied)
	}
}

// TestRedeliveredWaitingQuarantinedOnWake: a capture waits for its hold;
// the record it names arrives as usage, so the capture is quarantined
// invalid_link when it wakes. A redelivery of the capture's input record
// answers with that outcome and its case, as its final result said.
func TestRedeliveredWaitingQuarantinedOnWake(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	capture := rec("record_id", "k-1", "hold_id", "h-x", "amount", "5")
	if r := mustSettle(t, s, batch(0, 0, capture))[0]; r.Outcome != "waiting" {
		t.Fatalf("capture: %+v", r)
	}
	mustSettle(t, s, batch(0, 1, rec("record_id", "h-x", "amount", "3")))
	var caseID int64
	if err := s.Pool().QueryRow(context.Background(),
		`SELECT id FROM conflict_cases WHERE record_id = 'k-1' AND reason = 'invalid_link'`).Scan(&caseID); err != nil {
		t.Fatalf("the capture was not quarantined invalid_link when it woke: %v", err)
	}
	r := mustSettle(t, s, batch(0, 0, capture))[0]
	if !r.Redelivered || r.Outcome != message.OutcomeQuarantined || r.Reason != message.ReasonInvalidLink || r.CaseID != caseID || len(r.Response) == 0 {
		t.Errorf("redelivered capture = %s/%s case %d response %q, want quarantined/invalid_link case %d with its response",
			r.Outcome, r.Reason, r.CaseID, r.Response, caseID)
	}
}

// TestEveryOutboxRowIsQueued: an outbox row reaches the relay's queue
// whoever inserts it — the settling transaction, or a settle of the
// previous schema still running while schema 4 lands, whose insert knows
// nothing of the queue — so no row is left unpublished and reported as
// published.
func TestEveryOutboxRowIsQueued(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	mustSettle(t, s, batch(0, 0, grant("g-1", "c", "5")))
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// Schema 3's outbox insert, as the service role.
	if _, err := tx.Exec(ctx, `SET LOCAL ROLE settle_app;
		INSERT INTO outbox (topic, key, value, headers) VALUES ('usage.dlq', 'k', 'v', '[]')`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM outbox_messages o WHERE NOT EXISTS (SELECT 1 FROM outbox_queue q WHERE o.id = ANY (q.ids))`); n != 0 {
		t.Errorf("%d outbox rows not on the relay's queue", n)
	}
	if n, _, err := inspect.New(s).OutboxBacklog(ctx); err != nil || n != 2 {
		t.Errorf("outbox backlog = %d (%v), want 2 (the settlement and the old-style row)", n, err)
	}
}

// TestFailingStatementIsNamed: when one statement of the batch's writes
// fails, the error names it (here the database refuses the partition's
// offset row), so an operator knows which table to look at.
func TestFailingStatementIsNamed(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, `
		CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON consumer_offsets FOR EACH ROW EXECUTE FUNCTION refuse();`); err != nil {
		t.Fatal(err)
	}
	_, err := s.Settle(ctx, "g", s.Decode(batch(0, 0, rec())))
	if err == nil || !strings.Contains(err.Error(), "consumer_offset_upsert") || !strings.Contains(err.Error(), "refused by the test") {
		t.Fatalf("settle = %v, want an error naming consumer_offset_upsert and the database's reason", err)
	}
}
