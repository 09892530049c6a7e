package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settlehq/settle/relay/outbox"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/settletest"
)

// TestPendingPlanFollowsGrowth holds the relay's read to one probe of an
// identity per queued settlement while identities grows faster than it is
// analysed. The relay's session reads on the plan it made at its first
// read (pgq.ProbesOnly: the cached generic plan), made here while the tables
// hold one batch; identities then grows to 20,000 rows of the same tenant
// with autovacuum off, and a read of 200 queued settlements must read a few
// identities per row. With the identity joined beside the outbox instead
// of probed on its own, the generic plan found it through
// identities_scope_key on the tenant alone and read the tenant's every
// identity for each row.
// At most 5 identity tuples read per message (202 for 200 measured); with
// the identity joined beside the outbox, 4,020,503: fails.
func TestPendingPlanFollowsGrowth(t *testing.T) {
	t.Parallel()
	const grown, queued = 20_000, 200
	ctx := context.Background()
	url := settletest.NewDatabase(t)
	pool := settletest.PoolOn(t, url, 2)
	s := settletest.StoreOn(t, pool, settle.Config{})
	settletest.Frozen(t, pool, "identities", "outbox", "outbox_settlements", "outbox_queue")
	settletest.MustSettle(t, s, settletest.Batch(0, 0, settletest.Usages("first", 2)...))

	// The lease of another Store on the same database: a relay that leads
	// in another process, which reads every message from the tables.
	lease := leader(t, settletest.StoreOn(t, pool, settle.Config{}))
	first, err := lease.Pending(ctx, 1000) // the session's plan, made now
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.MarkPublished(ctx, ids(first)); err != nil {
		t.Fatal(err)
	}

	// Grown by copies of one settled identity under new record ids, then
	// a batch whose settlements are queued.
	settletest.GrowIdentities(t, pool, grown)
	settletest.MustSettle(t, s, settletest.Batch(0, 2, settletest.Usages("measured", queued)...))

	_, before := settletest.TuplesRead(t, pool, url, "identities")
	ms, err := lease.Pending(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < queued {
		t.Fatalf("read %d queued messages, want at least %d", len(ms), queued)
	}
	// The lease's session counts its reads in its own backend; they reach
	// the statistics when it ends.
	if err := lease.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var read int64
	for deadline := time.Now().Add(10 * time.Second); read == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		_, after := settletest.TuplesRead(t, pool, url, "identities")
		read = after - before
	}
	t.Logf("identities: %d tuples read by the relay's read of %d messages beside %d identities", read, len(ms), grown)
	if read == 0 || read > int64(5*len(ms)) {
		t.Fatalf("identities: %d tuples read for %d messages (at least 1, at most %d): the relay's read scans the tenant's identities instead of probing each by its key",
			read, len(ms), 5*len(ms))
	}
}

func ids(ms []outbox.Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// TestResultReadLeavesSettlementsAlone: a queued message that is an outbox
// row (here the waiting result of a refund whose target has not arrived)
// is read without touching the tenant's outbox_settlements rows, and a
// queue row of settlements reads its own row only. 300 transactions of one
// settlement each are published first; a relay of another Store (every
// message read from the tables) then reads the one queued result, and the
// settlements of one more transaction. Seen failing with every queued
// message that a settlements row might hold looked for there: the result's
// read walked back over all 301 of the tenant's rows.
func TestResultReadLeavesSettlementsAlone(t *testing.T) {
	t.Parallel()
	const txns = 300
	ctx := context.Background()
	url := settletest.NewDatabase(t)
	pool := settletest.PoolOn(t, url, 2)
	s := settletest.StoreOn(t, pool, settle.Config{})
	settletest.MustSettle(t, s, settletest.Batch(0, 0, settletest.Grant("g-1", "cust-1", "100000")))
	for i := 1; i <= txns; i++ {
		settletest.MustSettle(t, s, settletest.Batch(0, int64(i), settletest.Rec("record_id", fmt.Sprintf("u-%d", i), "amount", "1")))
	}
	drain := func(lease *outbox.Lease) {
		for {
			ms, err := lease.Pending(ctx, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 0 {
				return
			}
			if err := lease.MarkPublished(ctx, ids(ms)); err != nil {
				t.Fatal(err)
			}
		}
	}
	relay := settletest.StoreOn(t, pool, settle.Config{})
	// A lease's session counts its reads in its own backend; they reach
	// the statistics when it ends: each read below is a lease of its own,
	// closed, and its backend given time to end.
	closed := func(lease *outbox.Lease) {
		if err := lease.Close(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
	}
	lease := leader(t, relay)
	drain(lease)
	closed(lease)

	read := func(what string, want int) {
		t.Helper()
		_, before := settletest.TuplesRead(t, pool, url, "outbox_settlements")
		lease := leader(t, relay)
		ms, err := lease.Pending(ctx, 1000)
		if err != nil || len(ms) != want {
			t.Fatalf("%s: read %d messages (%v), want %d", what, len(ms), err, want)
		}
		if err := lease.MarkPublished(ctx, ids(ms)); err != nil {
			t.Fatal(err)
		}
		closed(lease)
		_, after := settletest.TuplesRead(t, pool, url, "outbox_settlements")
		t.Logf("%s: %d outbox_settlements tuples read beside %d rows", what, after-before, txns+1)
		if after-before > 3 {
			t.Errorf("%s: %d outbox_settlements tuples read (at most 3)", what, after-before)
		}
	}
	settletest.MustSettle(t, s, settletest.Batch(0, txns+1, settletest.Signal("refund", "u-404", "cust-1")))
	read("a waiting result", 1)
	settletest.MustSettle(t, s, settletest.Batch(0, txns+2, settletest.Rec("record_id", "u-last", "amount", "1"),
		settletest.Rec("record_id", "u-last-2", "amount", "1")))
	read("a transaction's settlements", 2)
}
