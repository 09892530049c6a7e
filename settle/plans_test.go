package settle_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/settletest"
)

// TestLookupPlansFollowGrowth holds the settling transaction's look-up of
// identities by scope key to index probes by the whole key while the table
// grows faster than it is analysed: one connection settles small batches
// while the table is small (its statement cache then holds plans made for a
// small table), identities then grows to 20,000 rows of one tenant with
// autovacuum off, and one more batch must read a few rows of identities
// (and of its indexes) per record. With the primary key led by tenant_id
// (schema 9), the plan cached while the table was small probed
// identities_pkey on tenant_id alone and read the tenant's every row for
// each record looked up (seen on a fresh database: 17–330 ms a batch);
// keyed (id, tenant_id) (migration 0010), no index but the scope key can
// serve the look-up.
func TestLookupPlansFollowGrowth(t *testing.T) {
	const grown, batch = 20_000, 200
	ctx := context.Background()
	url := settletest.NewDatabase(t)
	pool := settletest.PoolOn(t, url, 1) // one connection: one statement cache
	s, err := settle.Open(ctx, pool, settle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ALTER TABLE identities SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	usage := func(prefix string, n int) []map[string]any {
		recs := make([]map[string]any, n)
		for i := range recs {
			recs[i] = settletest.Rec("record_id", fmt.Sprintf("%s-%d", prefix, i), "subject", fmt.Sprintf("s-%d", i%50))
		}
		return recs
	}
	offset := int64(0)
	settleAll := func(recs []map[string]any) {
		settletest.MustSettle(t, s, settletest.Batch(0, offset, recs...))
		offset += int64(len(recs))
	}
	// PostgreSQL makes a statement's generic plan at its sixth execution
	// and uses it once it costs less than the custom plans made so far:
	// six batches of one record while the table holds a page, then
	// batches of 40, whose custom plans cost more than the generic one.
	for b := range 16 {
		n := 1
		if b >= 6 {
			n = 40
		}
		settleAll(usage(fmt.Sprintf("small-%d", b), n))
	}
	// Grown by copies of one settled identity under new record ids: the
	// look-up's table is as large as a busy tenant's, its statistics as old
	// as the first batches.
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
	seq, idx := settletest.TuplesRead(t, pool, url, "identities")
	settleAll(usage("measured", batch))
	seq2, idx2 := settletest.TuplesRead(t, pool, url, "identities")
	read := seq2 - seq + idx2 - idx
	t.Logf("identities: %d tuples read settling %d records beside %d identities", read, batch, grown)
	if read > 10*batch {
		t.Fatalf("identities: %d tuples read settling %d records (at most %d): a look-up scans the tenant's identities instead of probing their keys",
			read, batch, 10*batch)
	}
}
