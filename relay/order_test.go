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
