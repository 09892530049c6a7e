package idempotency_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/settlehq/settle/edge/idempotency"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// TestGroupPlansFollowGrowth holds the statements of a group's keys to
// index probes while idempotency_keys grows faster than it is analysed
// (pgq.ProbesOnly, the settling transaction's): one connection settles
// groups while the table holds a page (its statement cache then holds
// plans made for a small table), the table then grows to 20,000 keys with
// autovacuum off, and one more group must read no row of it by
// sequential scan. A plan cached while the table was small had scanned it
// whole for every group (seen on a fresh database: 16 ms a group at 40,000
// keys).
// 0 rows read by sequential scan; with the transaction begun without
// pgq.ProbesOnly's settings, 20,406: fails.
func TestGroupPlansFollowGrowth(t *testing.T) {
	t.Parallel()
	const grown = 20_000
	ctx := context.Background()
	url := settletest.NewDatabase(t)
	pool := settletest.PoolOn(t, url, 1) // one connection: one statement cache
	s := settletest.StoreOn(t, pool, settle.Config{})
	settletest.Frozen(t, pool, "idempotency_keys")
	group := func(name string, n int) {
		t.Helper()
		var (
			reqs   []idempotency.Request
			inputs []message.Input
		)
		for i := range n {
			req, in := request(fmt.Sprintf("%s-%d", name, i), fmt.Sprintf("u-%s-%d", name, i), "a")
			reqs, inputs = append(reqs, req), append(inputs, in)
		}
		if _, _, err := settleGroup(t, s, reqs, inputs, func(int, []message.Result) (idempotency.Answer, error) {
			return idempotency.Answer{Status: 200, Body: []byte("ok")}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// PostgreSQL makes a statement's generic plan at its sixth execution
	// and uses it once it costs less than the custom plans made so far:
	// six groups of one key while the table holds a page, then groups of
	// 40, whose custom plans cost more than the generic one.
	for g := range 16 {
		n := 1
		if g >= 6 {
			n = 40
		}
		group(fmt.Sprintf("small-%d", g), n)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO idempotency_keys (tenant_id, key, request_hash, canonicals, records, attempt_id, status, lease_until,
		                              response_status, answer)
		SELECT 'acme', 'grown-' || g, '\x00', ARRAY['\x00'::bytea], 1, gen_random_uuid(), 'done', now(), 200, '\x00'
		  FROM generate_series(1, $1::int) g`, grown); err != nil {
		t.Fatal(err)
	}
	before, _ := settletest.TuplesRead(t, pool, url, "idempotency_keys")
	group("measured", 40)
	after, _ := settletest.TuplesRead(t, pool, url, "idempotency_keys")
	scanned := after - before
	t.Logf("idempotency_keys: %d rows read by sequential scan for a group of 40 keys beside %d keys", scanned, grown)
	if scanned > 0 {
		t.Fatalf("idempotency_keys: %d rows read by sequential scan for one group: a group's statement scans the table instead of probing its keys", scanned)
	}
}
