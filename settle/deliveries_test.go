package settle_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// TestFirstDeliveryWrittenOnce: a first delivery's coordinates are written
// only on the row it writes (identity, waiting operation, dead letter);
// delivery_repeats gets rows only for a repeat and a quarantine. The
// deliveries view still shows one delivery per input record, and a
// redelivery of every one of those coordinates is recognised: it repeats
// its stored result, writes no row and moves no balance.
// Seen failing with the identity branch of the redelivery check removed:
// the redeliveries became duplicates.
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

// TestRedeliveryProbesBelowCommittedOffsets: a batch probes for earlier
// deliveries only the records below the offset their partition last
// committed in this process; a record past it that another process settled
// first (a repeat, a quarantine, a dead letter, a first delivery) is still
// answered as a redelivery of that process's result, by the attempt after
// the one whose writes the coordinates' keys refused. Seen failing with
// every attempt trusting the committed offset (the batch then lost the same
// race until its retries ran out).
func TestRedeliveryProbesBelowCommittedOffsets(t *testing.T) {
	t.Parallel()
	url := settletest.NewDatabase(t)
	s := settletest.NewStoreOn(t, url, settle.Config{ContentionRetriesMax: 5})
	other := settletest.NewStoreOn(t, url, settle.Config{})
	u := rec("record_id", "u-1", "amount", "10")
	first := batch(0, 0, grant("g-1", "cust-1", "100"), u, rec("record_id", "u-2", "amount", "3"))
	mustSettle(t, s, first)
	if n := s.DeliveryProbes(); n != 3 {
		t.Fatalf("first batch probed %d records, want 3 (nothing committed here yet)", n)
	}

	// Past this process's offset 3: its own next batch probes nothing.
	mustSettle(t, s, batch(0, 3, rec("record_id", "u-3", "amount", "1")))
	if n := s.DeliveryProbes(); n != 3 {
		t.Errorf("a batch past the committed offset probed %d records, want none", n-3)
	}
	// Below it: probed, and answered as the redelivery it is.
	if r := mustSettle(t, s, first); !r[1].Redelivered || !r[2].Redelivered {
		t.Errorf("redelivery below the committed offset: %+v", r)
	}

	// Another process settles offsets 4..7 of the partition first: a
	// repeat, a quarantine, a dead letter and a first delivery.
	past := batch(0, 4, u, clone(u, "amount", "11"), rec("record_id", "u-4", "amount", "-5"), rec("record_id", "u-5", "amount", "2"))
	want := mustSettle(t, other, past)
	if got := outcomes(want); !reflect.DeepEqual(got, []string{"duplicate", "quarantined:fingerprint_mismatch", "dead_lettered:invalid_field", "settled"}) {
		t.Fatalf("the other process's outcomes = %v", got)
	}
	got := mustSettle(t, s, past)
	for i, r := range got {
		if !r.Redelivered || r.Outcome != want[i].Outcome || r.Reason != want[i].Reason || r.CaseID != want[i].CaseID ||
			string(r.Response) != string(want[i].Response) {
			t.Errorf("record %d past the committed offset, settled by another process: %s/%s redelivered %v, want its %s/%s",
				i, r.Outcome, r.Reason, r.Redelivered, want[i].Outcome, want[i].Reason)
		}
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM delivery_repeats`); n != 2 {
		t.Errorf("delivery_repeats = %d rows, want 2 (the repeat and the quarantine, once each)", n)
	}
	checkInvariants(t, s.Pool())
}

// TestFirstDeliveryInputsAreNotProbed: inputs their caller marks as first
// delivered (an Idempotency-Key's first attempt) are not probed for an
// earlier delivery, with or without a consumer group; marked so at
// coordinates that did have deliveries (a repeat, a dead letter), they are
// still answered as those redeliveries, by the attempt after the one the
// coordinates' keys refused. Seen failing with the mark trusted on every
// attempt, and with it ignored (the probe count).
func TestFirstDeliveryInputsAreNotProbed(t *testing.T) {
	t.Parallel()
	s := settletest.NewStoreOn(t, settletest.NewDatabase(t), settle.Config{ContentionRetriesMax: 5})
	u := rec("record_id", "u-1", "amount", "10")
	ins := batch(0, 0, grant("g-1", "cust-1", "100"), u, u, rec("record_id", "u-2", "amount", "-5"))
	first := func(ins []message.Input) []message.Input {
		for i := range ins {
			ins[i].FirstDelivery = true
		}
		return ins
	}
	rs, err := s.Settle(context.Background(), "", s.Decode(first(ins)))
	if err != nil {
		t.Fatal(err)
	}
	if n := s.DeliveryProbes(); n != 0 {
		t.Errorf("first deliveries probed %d records, want none", n)
	}
	again, err := s.Settle(context.Background(), "", s.Decode(first(batch(0, 0, grant("g-1", "cust-1", "100"), u, u, rec("record_id", "u-2", "amount", "-5")))))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if !r.Redelivered || r.Outcome != rs[i].Outcome || r.Reason != rs[i].Reason || string(r.Response) != string(rs[i].Response) {
			t.Errorf("record %d marked first delivered but delivered before: %s/%s redelivered %v, want its %s/%s",
				i, r.Outcome, r.Reason, r.Redelivered, rs[i].Outcome, rs[i].Reason)
		}
	}
	checkInvariants(t, s.Pool())
}
