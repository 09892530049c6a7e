package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	gen "github.com/settlehq/settle/internal/workload"
)

// workload is a generated stream of usage records (internal/workload) and
// what each record, identity and outcome must end as.
type workload struct {
	partitions int
	records    []gen.Record // in production order, each naming its partition
	// Produced coordinates, filled by produce: every input record.
	coords map[coord]bool

	effects  map[gen.Identity]gen.Effect // every identity's expected outcome and effect
	outcomes map[string]int              // expected deliveries by outcome
	accounts []gen.Account               // every account's expected balance
	counts   map[string]int              // records by how they were made
}

type coord struct {
	partition int32
	offset    int64
}

// e2eMix: ~30% duplicates of earlier records (half with another source and
// attributes, a third of them keyed differently onto another partition: a
// producer that retried through another route, before or after the
// original), ~1% conflicts (same identity, another amount, after the
// original on its partition), the rest usage and grants. Usage and grants
// do not depend on order across partitions, so every identity's effect is
// known in advance whatever the interleaving, and each writes exactly one
// balance row, which check asserts.
var e2eMix = gen.Mix{Duplicates: 0.30, Conflicts: 0.01, Grants: 0.14, Reprovenanced: 0.5, CrossPartition: 1.0 / 3}

// newWorkload generates total records over partitions.
func newWorkload(seed uint64, total, partitions int) *workload {
	g, err := gen.New(gen.Config{Tenants: 5, Subjects: 2000, Partitions: partitions, Period: "2026-11", Seed: seed,
		Source: "e2e", Mix: e2eMix, TrackEffects: true})
	if err != nil {
		panic(err)
	}
	w := &workload{partitions: partitions, records: g.Take(total), coords: map[coord]bool{},
		effects: g.Model().Effects(), outcomes: map[string]int{}, accounts: g.Model().Accounts(), counts: g.Counts()}
	for e, n := range g.Model().Outcomes() {
		w.outcomes[e.Outcome] += n
	}
	return w
}

// produce publishes records[from:to] in order and records their coordinates.
func (w *workload) produce(t *testing.T, cl *kgo.Client, from, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, 0, to-from)
	for _, r := range w.records[from:to] {
		recs = append(recs, &kgo.Record{Topic: "usage", Partition: r.Partition, Key: r.Key, Value: r.Value})
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
	made := make([]string, 0, len(w.counts))
	for what, n := range w.counts {
		made = append(made, fmt.Sprintf("%d %s", n, what))
	}
	sort.Strings(made)
	return fmt.Sprintf("%d records over %d partitions: %s; expected outcomes %v",
		len(w.records), w.partitions, strings.Join(made, ", "), w.outcomes)
}
