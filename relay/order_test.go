package relay_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/settletest"
)

// TestSettlementsInAccountOrder: transactions that move the same accounts
// of two tenants commit concurrently, each writing its settlements as one
// outbox row per tenant; the settlements topic holds every settlement once,
// and each account's in its sequence order (1, 2, 3, … under its key). The
// relay is another Store's, so it reads every message from the tables.
// Seen failing with each row's ids given to its settlements in reverse
// order (an account's sequence 5 came first).
func TestSettlementsInAccountOrder(t *testing.T) {
	t.Parallel()
	const writers, batches, perBatch = 4, 12, 30
	k := kafkatest.NewCluster(t, 1)
	url := settletest.NewDatabase(t)
	pool := settletest.PoolOn(t, url, 16)
	s := settletest.StoreOn(t, pool, settle.Config{})
	var g errgroup.Group
	for w := range writers {
		g.Go(func() error {
			for b := range batches {
				recs := make([]map[string]any, perBatch)
				for i := range recs {
					n := (w*batches+b)*perBatch + i
					recs[i] = settletest.Grant(fmt.Sprintf("g-%d", n), fmt.Sprintf("cust-%d", n%3), "1")
					recs[i]["tenant_id"] = []string{"acme", "globex"}[n%2]
				}
				ins := settletest.Batch(int32(w), int64(b*perBatch), recs...)
				if _, err := s.Settle(context.Background(), "g", s.Decode(ins)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	other := settletest.StoreOn(t, pool, settle.Config{})
	stop := testnet.Background(t, newRelay(t, other, k).Run)
	testnet.WaitFor(t, "the outbox to drain", 60*time.Second, func() bool { return unpublished(t, other) == 0 })
	stop()
	const total = writers * batches * perBatch
	msgs := k.Read(t, "settlements", total, 20*time.Second)
	if len(msgs) != total {
		t.Fatalf("settlements has %d messages, want %d", len(msgs), total)
	}
	next := map[string]int64{} // by key: the sequence the next message must carry
	ids := map[string]bool{}
	for _, m := range msgs {
		seq, err := strconv.ParseInt(kafkatest.Header(m, "sequence"), 10, 64)
		if err != nil {
			t.Fatalf("message %s@%d: sequence header: %v", m.Key, m.Offset, err)
		}
		key := string(m.Key)
		if want := next[key] + 1; seq != want {
			t.Fatalf("account %s: sequence %d at offset %d after %d, want %d", key, seq, m.Offset, next[key], want)
		}
		next[key] = seq
		ids[kafkatest.Header(m, "settlement_id")] = true
	}
	if len(next) != 6 || len(ids) != total {
		t.Errorf("%d accounts and %d settlement ids on the topic, want 6 and %d", len(next), len(ids), total)
	}
}

// TestSettlementsBeyondABlock: two transactions commit at once, each
// settling more of one tenant's settlements than a block of the outbox's
// sequence holds (db.IDBlock, 1,000), so each writes a tenant's
// settlements as two rows, each row one block. Every settlement has an
// outbox id of its own, a row's ids are one block's, a tenant's later
// row has the higher ids, and the topic holds every settlement once, each
// account's in sequence order. Seen failing with rows of 1,500
// settlements, which run past their block into the other transaction's.
func TestSettlementsBeyondABlock(t *testing.T) {
	t.Parallel()
	const writers, perBatch = 2, 1500
	k := kafkatest.NewCluster(t, 1)
	url := settletest.NewDatabase(t)
	pool := settletest.PoolOn(t, url, 8)
	s := settletest.StoreOn(t, pool, settle.Config{BatchRecordsMax: perBatch})
	var g errgroup.Group
	for w := range writers {
		g.Go(func() error {
			recs := make([]map[string]any, perBatch)
			for i := range recs {
				recs[i] = settletest.Grant(fmt.Sprintf("g-%d-%d", w, i), fmt.Sprintf("cust-%d", i%3), "1")
			}
			_, err := s.Settle(context.Background(), "g", s.Decode(settletest.Batch(int32(w), 0, recs...)))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	rows, err := pool.Query(context.Background(), `SELECT tenant_id, id, ids FROM outbox_settlements ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	var blocks int
	for rows.Next() {
		var tenant string
		var first int64
		var ids []int64
		if err := rows.Scan(&tenant, &first, &ids); err != nil {
			t.Fatal(err)
		}
		blocks++
		if len(ids) > 1000 {
			t.Errorf("row %d holds %d settlements, more than a block", first, len(ids))
		}
		for i, id := range ids {
			if id != first+int64(i) {
				t.Errorf("row %d: id %d at %d, want %d (a block's ids in order)", first, id, i, first+int64(i))
			}
			if seen[id] {
				t.Errorf("outbox id %d given to two settlements", id)
			}
			seen[id] = true
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if blocks != 2*writers || len(seen) != writers*perBatch {
		t.Fatalf("%d rows holding %d ids, want %d rows holding %d", blocks, len(seen), 2*writers, writers*perBatch)
	}

	stop := testnet.Background(t, newRelay(t, settletest.StoreOn(t, pool, settle.Config{}), k).Run)
	testnet.WaitFor(t, "the outbox to drain", 60*time.Second, func() bool { return unpublished(t, s) == 0 })
	stop()
	msgs := k.Read(t, "settlements", writers*perBatch, 20*time.Second)
	next := map[string]int64{}
	for _, m := range msgs {
		seq, err := strconv.ParseInt(kafkatest.Header(m, "sequence"), 10, 64)
		if err != nil {
			t.Fatalf("message %s@%d: sequence header: %v", m.Key, m.Offset, err)
		}
		if want := next[string(m.Key)] + 1; seq != want {
			t.Fatalf("account %s: sequence %d at offset %d, want %d", m.Key, seq, m.Offset, want)
		}
		next[string(m.Key)] = seq
	}
	if len(msgs) != writers*perBatch {
		t.Fatalf("settlements has %d messages, want %d", len(msgs), writers*perBatch)
	}
}
