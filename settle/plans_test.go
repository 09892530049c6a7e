package settle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/settletest"
)

// TestLookupPlansFollowGrowth holds the settling transaction's look-ups to
// index probes by their whole key while the tables grow faster than they
// are analysed: one connection settles small batches while identities,
// dead_letters, waiting and accounts hold a page (its statement cache then
// holds plans made for small tables), each then grows to 20,000 rows (the
// tenant's identities, waiting operations and accounts, the dead letters of
// tenant "") with autovacuum off, and one more batch must read a few rows of
// each (and of its indexes) per record. With the primary keys led by
// tenant_id (schema 9), the plans cached while the tables were small probed
// identities_pkey and waiting_pkey on tenant_id alone and read the tenant's
// every row for each record looked up (seen on a fresh database: 17–330 ms
// a batch); keyed (id, tenant_id) (migration 0010), no index but the natural
// keys can serve the look-ups. The redelivery look-up, joined
// freely, read every dead letter once a batch; it probes from the batch's
// coordinates (delivery_lookup.sql). Conflict cases too: a batch that
// opens cases reads their ids back by their natural key
// (conflict_case_ids.sql), and one that applies an orphan closes its case
// by id (conflict_case_close.sql). With conflict_cases keyed (tenant_id,
// id) (schema 17), the primary key served the first on tenant_id alone,
// and with status = 'open' as its condition the second walked the index
// of open cases (seen in the growth bench: most of PostgreSQL's time at
// 120,000 cases; here 20,006 and 20,005 tuples read).
func TestLookupPlansFollowGrowth(t *testing.T) {
	const grown, batch = 20_000, 200
	ctx := context.Background()
	url := settletest.NewDatabase(t)
	pool := settletest.PoolOn(t, url, 1) // one connection: one statement cache
	s := settletest.StoreOn(t, pool, settle.Config{})
	settletest.Frozen(t, pool, "identities", "dead_letters", "waiting", "accounts", "conflict_cases")
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
		settleAll(settletest.Usages(fmt.Sprintf("small-%d", b), n))
	}
	// A case opened (small-0-0 again, at another amount) and an orphan's
	// case closed while conflict_cases is small: their plans are cached.
	orphan := func(id string) {
		settleAll([]map[string]any{settletest.Signal("refund", id, "s-1")})
		time.Sleep(20 * time.Millisecond)
		if n, err := s.SweepOrphans(ctx, 10*time.Millisecond); err != nil || n != 1 {
			t.Fatalf("sweep of the refund of %s: %d, %v; want its orphan case", id, n, err)
		}
	}
	orphan("orphan-small")
	settleAll([]map[string]any{settletest.Rec("record_id", "small-0-0", "subject", "s-0", "amount", "99"),
		settletest.Rec("record_id", "orphan-small", "subject", "s-1")})
	orphan("orphan-measured") // its case is closed by the measured batch
	// Grown by copies of one settled identity under new record ids: the
	// look-up's table is as large as a busy tenant's, its statistics as old
	// as the first batches.
	settletest.GrowIdentities(t, pool, grown)
	// And as many dead letters: every batch's redelivery look-up probes
	// them by coordinates (dead_letters_source_key), all under tenant ''.
	if _, err := pool.Exec(ctx, `
		INSERT INTO dead_letters (tenant_id, topic, partition, "offset", value, reason, error_class, error, attempts)
		SELECT '', 'usage', 1, g, '\x00', 'invalid', 'permanent', 'grown', 1 FROM generate_series(1, $1::int) g`, grown); err != nil {
		t.Fatal(err)
	}
	// And as many waiting operations and accounts of the tenant: every
	// batch looks its records up among the waiting (waiting_scope_key,
	// waiting_target) and its accounts by key (accounts_key).
	if _, err := pool.Exec(ctx, `
		INSERT INTO waiting (tenant_id, account_period, record_id, operation, target_period, target_record_id,
		                     fingerprint, canonical, value, topic, partition, "offset", response)
		SELECT 'acme', '2026-11', 'grown-' || g, 'refund', '2026-11', 'grown-target-' || g, 0, '\x00', '\x00',
		       'usage', 2, g, '{}' FROM generate_series(1, $1::int) g`, grown); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO accounts (tenant_id, subject, currency) SELECT 'acme', 'grown-' || g, 'USD' FROM generate_series(1, $1::int) g`, grown); err != nil {
		t.Fatal(err)
	}
	// And as many open cases of the tenant: the batch opens one and
	// closes an orphan's (conflict_cases_key, the primary key by id).
	if _, err := pool.Exec(ctx, `
		INSERT INTO conflict_cases (tenant_id, account_period, record_id, operation, reason, incoming_fingerprint,
		                            incoming_canonical, topic, partition, "offset")
		SELECT 'acme', '2026-11', 'grown-' || g, 'usage', 'fingerprint_mismatch', g, '\x00', 'usage', 3, g
		  FROM generate_series(1, $1::int) g`, grown); err != nil {
		t.Fatal(err)
	}
	tables := []string{"identities", "dead_letters", "waiting", "accounts", "conflict_cases"}
	before := map[string]int64{}
	for _, table := range tables {
		seq, idx := settletest.TuplesRead(t, pool, url, table)
		before[table] = seq + idx
	}
	settleAll(append(settletest.Usages("measured", batch), settletest.Rec("record_id", "small-1-0", "subject", "s-0", "amount", "99"),
		settletest.Rec("record_id", "orphan-measured", "subject", "s-1")))
	for _, table := range tables {
		seq, idx := settletest.TuplesRead(t, pool, url, table)
		read := seq + idx - before[table]
		t.Logf("%s: %d tuples read settling %d records beside %d rows", table, read, batch, grown)
		if read > 10*batch {
			t.Errorf("%s: %d tuples read settling %d records (at most %d): a look-up scans the table instead of probing its keys",
				table, read, batch, 10*batch)
		}
	}
	// Read after the counts above: these scan the table.
	if n := settletest.Count(t, pool, `SELECT count(*) FROM conflict_cases WHERE reason = 'orphan' AND status = 'auto_resolved'`); n != 2 {
		t.Fatalf("%d orphan cases closed, want 2: the batches did not close the cases whose plans this test holds", n)
	}
	if n := settletest.Count(t, pool, `SELECT count(*) FROM conflict_cases WHERE reason = 'fingerprint_mismatch' AND record_id LIKE 'small-%'`); n != 2 {
		t.Fatalf("%d mismatch cases opened, want 2: the batches did not open the cases whose plans this test holds", n)
	}
}

// TestSmallBatchesPlanOnce holds the settling transaction's statements to
// one plan each per connection: batches of two records (a group of the HTTP
// edge, a quiet stream) bind arrays whose custom plans PostgreSQL judged
// cheaper than the generic one, so without plan_cache_mode =
// force_generic_plan (pgq.ProbesOnly) it planned most statements of every such
// batch again (a quarter of the edge's statement time).
// 30 batches of 2 records: 0 custom plans; without pgq.ProbesOnly's
// plan_cache_mode, 290: fails.
func TestSmallBatchesPlanOnce(t *testing.T) {
	const batches = 30
	ctx := context.Background()
	pool := settletest.PoolOn(t, settletest.NewDatabase(t), 1) // one connection: its prepared statements
	s := settletest.StoreOn(t, pool, settle.Config{})
	for b := range batches {
		settletest.MustSettle(t, s, settletest.Batch(0, int64(2*b),
			settletest.Rec("record_id", fmt.Sprintf("r-%d-a", b)), settletest.Rec("record_id", fmt.Sprintf("r-%d-b", b))))
	}
	var custom, generic int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(custom_plans), 0)::bigint, coalesce(sum(generic_plans), 0)::bigint
		FROM pg_prepared_statements`).Scan(&custom, &generic); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d batches of 2 records: %d custom plans, %d runs on a generic plan", batches, custom, generic)
	if generic == 0 || custom > 0 {
		t.Fatalf("%d batches of 2 records: %d custom plans and %d runs on a generic plan: a settling statement is planned again at every batch",
			batches, custom, generic)
	}
}
