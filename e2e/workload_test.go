package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// workload is a generated stream of usage records and what each identity
// must end as.
type workload struct {
	partitions int
	records    []*kgo.Record // in production order; partition set by hand
	// Produced coordinates, filled by produce: every input record.
	coords map[coord]bool

	identities map[string]expected // by identityKey

	originals, duplicates, crossPartition, conflicts int
}

// expected is what one identity must have settled: one effect of amount
// (signed: a charge is negative) as one balance row.
type expected struct {
	amount string
	kind   string
}

type coord struct {
	partition int32
	offset    int64
}

func identityKey(tenant, period, record, op string) string {
	return tenant + "|" + period + "|" + record + "|" + op
}

// newWorkload generates total records over partitions: ~30% duplicates of
// earlier records (a third of them under another key, on another
// partition: a producer that retried through another route), ~1%
// conflicts (same identity, another amount, after the original on its
// partition), the rest new usage (80%) and grant (20%) records. Usage and
// grants do not depend on order across accounts, so every identity's
// effect is known in advance whatever the interleaving.
func newWorkload(seed uint64, total, partitions int) *workload {
	rng := rand.New(rand.NewPCG(seed, 0x5e771e))
	w := &workload{partitions: partitions, identities: map[string]expected{}, coords: map[coord]bool{}}
	w.duplicates = total * 30 / 100
	w.conflicts = total / 100
	w.originals = total - w.duplicates - w.conflicts

	type item struct {
		at  float64
		rec *kgo.Record
	}
	type orig struct {
		fields map[string]any
		key    string
		part   int32
	}
	partOf := func(key string) int32 {
		h := fnv.New32a()
		h.Write([]byte(key))
		return int32(h.Sum32() % uint32(partitions))
	}
	items := make([]item, 0, total)
	origs := make([]orig, w.originals)
	for i := range origs {
		tenant := fmt.Sprintf("t%d", rng.IntN(5))
		subject := fmt.Sprintf("acct-%03d", rng.IntN(400))
		kind := "usage"
		if rng.IntN(5) == 0 {
			kind = "grant"
		}
		amount := fmt.Sprintf("%d.%03d", 1+rng.IntN(500), rng.IntN(1000))
		f := map[string]any{
			"tenant_id": tenant, "account_period": "2026-11", "record_id": fmt.Sprintf("r-%06d", i),
			"kind": kind, "subject": subject, "amount": amount, "currency": "USD",
			"occurred_at": "2026-11-03T10:00:00Z",
		}
		signed := amount
		if kind == "usage" {
			f["meter"], f["quantity"], f["unit"], f["finalization_version"] = "gpu_seconds", amount, "s", 1
			signed = "-" + amount
		}
		key := tenant + "/" + subject
		origs[i] = orig{fields: f, key: key, part: partOf(key)}
		w.identities[identityKey(tenant, "2026-11", f["record_id"].(string), kind)] = expected{amount: signed, kind: kind}
		items = append(items, item{at: float64(i), rec: w.rec(origs[i].part, key, f)})
	}
	n := float64(w.originals)
	for range w.duplicates {
		i := rng.IntN(w.originals)
		o := origs[i]
		f := o.fields
		if rng.IntN(2) == 0 {
			// Same material fields, different provenance: still a duplicate.
			f = clone(f)
			f["source"] = "retry-path"
			f["attributes"] = map[string]any{"attempt": 2}
		}
		if rng.IntN(3) == 0 {
			// Keyed differently, on another partition: may even arrive
			// before the original, which then is the duplicate.
			w.crossPartition++
			part := (o.part + 1 + int32(rng.IntN(partitions-1))) % int32(partitions)
			items = append(items, item{at: rng.Float64() * n, rec: w.rec(part, o.key+"/retry", f)})
			continue
		}
		items = append(items, item{at: float64(i) + rng.Float64()*(n-float64(i)), rec: w.rec(o.part, o.key, f)})
	}
	for _, i := range rng.Perm(w.originals)[:w.conflicts] {
		o := origs[i]
		f := clone(o.fields)
		f["amount"] = "9" + f["amount"].(string)
		if f["kind"] == "usage" {
			f["quantity"] = f["amount"]
		}
		items = append(items, item{at: float64(i) + 0.5 + rng.Float64()*(n-float64(i)), rec: w.rec(o.part, o.key, f)})
	}
	sort.SliceStable(items, func(a, b int) bool { return items[a].at < items[b].at })
	w.records = make([]*kgo.Record, len(items))
	for i, it := range items {
		w.records[i] = it.rec
	}
	return w
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (w *workload) rec(part int32, key string, f map[string]any) *kgo.Record {
	b, err := json.Marshal(f)
	if err != nil {
		panic(err)
	}
	return &kgo.Record{Topic: "usage", Partition: part, Key: []byte(key), Value: b}
}

// produce publishes records[from:to] in order and records their coordinates.
func (w *workload) produce(t *testing.T, cl *kgo.Client, from, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Fresh records: a record once produced carries its offset.
	recs := make([]*kgo.Record, 0, to-from)
	for _, r := range w.records[from:to] {
		recs = append(recs, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value})
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Errorf("produce records %d..%d: %v", from, to, err)
		return
	}
	for _, r := range res {
		w.coords[coord{r.Record.Partition, r.Record.Offset}] = true
	}
}

// producer returns a client that writes to the partition each record names.
func producer(t *testing.T, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (w *workload) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d records over %d partitions: %d originals, %d duplicates (%d on another partition), %d conflicts",
		len(w.records), w.partitions, w.originals, w.duplicates, w.crossPartition, w.conflicts)
	return b.String()
}
