package e2e

import (
	"testing"
	"time"

	"github.com/settlehq/settle/internal/kafkatest"
)

// TestSigtermMidStream: `settle run` gets SIGTERM while records flow; it
// finishes the batch in hand, commits, publishes its outbox and exits 0;
// records produced while it is down are settled by the restarted process.
// Afterwards nothing is lost or settled twice, and because the stop was
// clean, the settlements topic has no repeats at all and Kafka's commits
// equal PostgreSQL's offsets.
func TestSigtermMidStream(t *testing.T) {
	t.Parallel()
	const total, partitions = 20_000, 6
	k := kafkatest.NewCluster(t, partitions)
	url := emptyDatabase(t)
	migrateDB(t, url)
	pool := openPool(t, url)
	w := newWorkload(4, total, partitions)
	cl := producer(t, k.Brokers)
	w.produce(t, cl, 0, total/2)

	r := runner{t: t, url: url, brokers: k.Brokers, group: "e2e-sigterm"}
	first := r.start("first")
	alive := func(i *instance) func() error {
		return func() error {
			if i.Exited() {
				t.Fatalf("settle %s exited on its own (code %d)", i.Name, i.ExitCode(0))
			}
			return nil
		}
	}
	waitDeliveries(t, pool, total/6, 2*time.Minute, alive(first))
	first.stop(t)
	atStop := countDeliveries(t, pool)
	if atStop >= total/2 {
		t.Logf("note: the first half was fully settled before SIGTERM took effect (%d deliveries)", atStop)
	}
	t.Logf("SIGTERM at %d of %d deliveries; exit 0", atStop, total)
	w.produce(t, cl, total/2, total) // while nothing runs

	second := r.start("second")
	waitDeliveries(t, pool, total, 3*time.Minute, alive(second))
	for deadline := time.Now().Add(time.Minute); outboxBacklog(t, pool) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("outbox not published within a minute")
		}
	}
	second.stop(t)

	f := check(t, pool, k.Brokers, r.group, w)
	for _, p := range f.problems {
		t.Error(p)
	}
	if f.settlementsRepeats != 0 {
		t.Errorf("settlements: %d repeats after clean stops, want 0", f.settlementsRepeats)
	}
	// Kafka's commits equal PostgreSQL's offsets: reconcile holds
	// PostgreSQL's at the end offsets (every record below them delivered,
	// none past them, no gap below PostgreSQL's offsets) and Kafka's not
	// ahead of them, so Kafka's at the end offsets is the equality.
	for p, e := range f.endOffsets {
		if f.kafkaOffsets[p] != e {
			t.Errorf("partition %d: kafka committed %d after a clean stop, the end offset (and postgres's) is %d", p, f.kafkaOffsets[p], e)
		}
	}
	t.Logf("figures: %d records, %d deliveries %v (as the model), settlements %d raw / %d distinct, %d results (repeats of redelivered records: %d)",
		len(w.coords), f.deliveries, w.outcomes, f.settlementsRaw, f.settlementsUnique, f.results, f.results-len(w.coords))
}
