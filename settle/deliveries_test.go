package settle_test

import (
	"reflect"
	"testing"
)

// TestFirstDeliveryWrittenOnce: a first delivery's coordinates are written
// only on the row it writes (identity, waiting operation, dead letter);
// delivery_repeats gets rows only for a repeat and a quarantine. The
// deliveries view still shows one delivery per input record, and a
// redelivery of every one of those coordinates is recognised: it repeats
// its stored result, writes no row and moves no balance.
func TestFirstDeliveryWrittenOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	pool := s.Pool()
	u := rec("record_id", "u-1", "amount", "10")
	ins := batch(0, 0,
		grant("g-1", "cust-1", "100"),
		u,
		u,                        // a duplicate
		clone(u, "amount", "11"), // a conflict
		rec("kind", "refund", "record_id", "u-later"), // waits for its target
		rec("record_id", "u-2", "amount", "-5"),       // invalid: a dead letter
	)
	first := mustSettle(t, s, ins)
	want := []string{"settled", "settled", "duplicate", "quarantined:fingerprint_mismatch", "waiting", "dead_lettered:invalid_field"}
	if got := outcomes(first); !reflect.DeepEqual(got, want) {
		t.Fatalf("outcomes = %v, want %v", got, want)
	}
	if n := count(t, pool, `SELECT count(*) FROM delivery_repeats`); n != 2 {
		t.Errorf("delivery_repeats = %d rows, want 2 (the duplicate and the conflict)", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM deliveries`); n != len(ins) {
		t.Errorf("deliveries = %d, want %d (one per input record)", n, len(ins))
	}
	if n := count(t, pool, `SELECT count(DISTINCT (topic, partition, "offset")) FROM deliveries`); n != len(ins) {
		t.Errorf("delivered coordinates = %d, want %d", n, len(ins))
	}

	redo := batch(0, 0,
		grant("g-1", "cust-1", "100"), u, u, clone(u, "amount", "11"),
		rec("kind", "refund", "record_id", "u-later"), rec("record_id", "u-2", "amount", "-5"))
	second := mustSettle(t, s, redo)
	for i, r := range second {
		if !r.Redelivered || r.Outcome != first[i].Outcome || r.Reason != first[i].Reason || string(r.Response) != string(first[i].Response) {
			t.Errorf("redelivery %d = %s/%s redelivered %v, want the stored %s/%s", i, r.Outcome, r.Reason, r.Redelivered, first[i].Outcome, first[i].Reason)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM delivery_repeats`); n != 2 {
		t.Errorf("after the redelivery delivery_repeats = %d rows, want 2", n)
	}
	if b := balance(t, pool, "acme", "cust-1", "USD"); b != "90" {
		t.Errorf("balance = %s, want 90", b)
	}
	checkInvariants(t, pool)
}
