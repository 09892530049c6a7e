package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/reconcile"
)

// TestDependentsAcrossPartitions: usages and their refunds (and
// corrections) produced to different partitions, so that two lanes of the
// real consumer settle them at the same time in either order, all meet:
// nothing is left waiting, every account nets to what the contract says,
// and on usage.results every input record has exactly one final result,
// after its waiting result when it waited.
func TestDependentsAcrossPartitions(t *testing.T) {
	t.Parallel()
	const pairs, partitions = 600, 6
	k := kafkatest.NewCluster(t, partitions)
	url := emptyDatabase(t)
	migrateDB(t, url)
	pool := openPool(t, url)
	cl := producer(t, k.Brokers)
	var recs []*kgo.Record
	for i := 0; i < pairs; i++ {
		subject := fmt.Sprintf("cust-%d", i%20)
		record := fmt.Sprintf("job-%d", i)
		usage := map[string]any{"tenant_id": "acme", "account_period": "2026-11", "record_id": record, "kind": "usage",
			"subject": subject, "amount": "10", "currency": "USD", "meter": "gpu_seconds", "quantity": "10", "unit": "s",
			"occurred_at": "2026-11-03T10:00:00Z", "finalization_version": 1}
		dependent := map[string]any{"tenant_id": "acme", "account_period": "2026-11", "record_id": record, "kind": "refund",
			"subject": subject, "occurred_at": "2026-11-03T10:00:00Z"}
		if (i/20)%2 == 1 {
			dependent = map[string]any{"tenant_id": "acme", "account_period": "2026-11", "record_id": "c-" + record, "kind": "correction",
				"corrects": record, "subject": subject, "amount": "4", "currency": "USD", "meter": "gpu_seconds", "quantity": "4", "unit": "s",
				"occurred_at": "2026-11-03T10:00:00Z", "finalization_version": 2}
		}
		for j, f := range []map[string]any{usage, dependent} {
			b, _ := json.Marshal(f)
			// The dependent goes to another partition than its target,
			// first in every other pair.
			p := int32((i + 3*j) % partitions)
			recs = append(recs, &kgo.Record{Topic: "usage", Partition: p, Key: []byte("acme/" + subject), Value: b})
		}
		if i%4 >= 2 {
			recs[len(recs)-2], recs[len(recs)-1] = recs[len(recs)-1], recs[len(recs)-2]
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := runner{t: t, url: url, brokers: k.Brokers, group: "e2e-dependents"}
	inst := r.start("one")
	waitDeliveries(t, pool, 2*pairs, 2*time.Minute, func() error {
		if inst.Exited() {
			t.Fatalf("settle exited on its own (code %d)", inst.ExitCode(0))
		}
		return nil
	})
	for deadline := time.Now().Add(time.Minute); outboxBacklog(t, pool) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("outbox not published within a minute")
		}
	}
	inst.stop(t)

	store, err := settle.Open(ctx, pool, settle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	totals, err := reconcile.Count(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if totals.Waiting != 0 {
		t.Errorf("%d operations still wait although every target settled", totals.Waiting)
	}
	// 30 pairs per account: 15 refunded (0), 15 corrected to 4; and
	// every other invariant reconcile checks.
	in := reconcile.Input{TenantID: "acme", OutboxGrace: time.Nanosecond, Group: r.group}
	for i := 0; i < 20; i++ {
		in.ExpectedAccounts = append(in.ExpectedAccounts, reconcile.ExpectedAccount{TenantID: "acme",
			Subject: fmt.Sprintf("cust-%d", i), Currency: "USD", Balance: "-60", Held: "0"})
	}
	rep, err := reconcile.Run(ctx, store, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("reconcile: %s: %s", f.Class, f.Detail)
	}

	// Per input record, in the order of its results partition.
	type seen struct{ waiting, final int }
	per := map[string]*seen{}
	waited := 0
	for _, m := range readAll(ctx, t, k.Brokers, "usage.results") {
		var res struct {
			Outcome string `json:"outcome"`
			Source  struct {
				Partition int32 `json:"partition"`
				Offset    int64 `json:"offset"`
			} `json:"source"`
		}
		if err := json.Unmarshal(m.Value, &res); err != nil {
			t.Fatalf("result %s: %v", m.Value, err)
		}
		key := fmt.Sprintf("%d/%d", res.Source.Partition, res.Source.Offset)
		s := per[key]
		if s == nil {
			s = &seen{}
			per[key] = s
		}
		switch {
		case res.Outcome == "waiting" && s.final > 0:
			t.Errorf("input %s: a waiting result after its final result", key)
		case res.Outcome == "waiting":
			s.waiting++
			waited++
		default:
			s.final++
		}
	}
	if len(per) != 2*pairs {
		t.Errorf("results for %d input records, want %d", len(per), 2*pairs)
	}
	for key, s := range per {
		if s.final == 0 {
			t.Errorf("input %s: no final result (%d waiting)", key, s.waiting)
		}
	}
	t.Logf("%d of %d dependents waited for their target", waited, pairs)
}
