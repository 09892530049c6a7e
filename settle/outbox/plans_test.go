package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/outbox"
	"github.com/settlehq/settle/settle/settletest"
)

// TestPendingPlanFollowsGrowth holds the relay's read to one probe of an
// identity per queued settlement while identities grows faster than it is
// analysed. The relay's session reads on the plan it made at its first
// read (db.ProbesOnly: the cached generic plan), made here while the tables
// hold one batch; identities then grows to 20,000 rows of the same tenant
// with autovacuum off, and a read of 200 queued settlements must read a few
// identities per row. With the identity joined beside the outbox instead
// of probed on its own, the generic plan found it through
// identities_scope_key on the tenant alone and read the tenant's every
// identity for each row.
func TestPendingPlanFollowsGrowth(t *testing.T) {
	t.Parallel()
	const grown, queued = 20_000, 200
	ctx := context.Background()
	url := settletest.NewDatabase(t)
	pool := settletest.PoolOn(t, url, 2)
	s, err := settle.Open(ctx, pool, settle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"identities", "outbox", "outbox_queue"} {
		if _, err := pool.Exec(ctx, "ALTER TABLE "+table+" SET (autovacuum_enabled = false)"); err != nil {
			t.Fatal(err)
		}
	}
	usage := func(prefix string, n int) []map[string]any {
		recs := make([]map[string]any, n)
		for i := range recs {
			recs[i] = settletest.Rec("record_id", fmt.Sprintf("%s-%d", prefix, i), "subject", fmt.Sprintf("s-%d", i%50))
		}
		return recs
	}
	settletest.MustSettle(t, s, settletest.Batch(0, 0, usage("first", 2)...))

	lease, err := outbox.New(s).Lease(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close(ctx)
	if ok, err := lease.TryAcquire(ctx); !ok || err != nil {
		t.Fatalf("lease: %v %v", ok, err)
	}
	first, err := lease.Pending(ctx, 1000) // the session's plan, made now
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.MarkPublished(ctx, ids(first)); err != nil {
		t.Fatal(err)
	}

	// Grown by copies of one settled identity under new record ids, then
	// a batch whose settlements are queued.
	if _, err := pool.Exec(ctx, `
		INSERT INTO identities (tenant_id, account_period, record_id, operation, fingerprint, canonical_version,
		                        canonical, outcome, reason, response, subject, currency, account_id, source, topic,
		                        partition, "offset", first_seen_at, last_attempted_at, attempts)
		SELECT tenant_id, account_period, 'grown-' || g, operation, fingerprint, canonical_version, canonical, outcome,
		       reason, response, subject, currency, account_id, source, topic, partition, -g, first_seen_at,
		       last_attempted_at, attempts
		  FROM (SELECT * FROM identities ORDER BY id LIMIT 1) i, generate_series(1, $1::int) g`, grown); err != nil {
		t.Fatal(err)
	}
	settletest.MustSettle(t, s, settletest.Batch(0, 2, usage("measured", queued)...))

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
