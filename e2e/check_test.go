package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/kafkaread"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/reconcile"
)

// findings is what check saw: problems (each a broken invariant, from
// reconcile's report) and the figures the report quotes.
type findings struct {
	problems []string

	deliveries         int64
	settlementsRaw     int // messages on the settlements topic
	settlementsUnique  int // distinct settlement_id
	settlementsRepeats int // raw - unique: republished by a relay that died before marking
	results            int
	kafkaOffsets       map[int32]int64
	endOffsets         map[int32]int64
	tenant             string // a tenant of the run
}

func (f *findings) bad(format string, args ...any) {
	if len(f.problems) < 200 { // enough to diagnose, not a flood
		f.problems = append(f.problems, fmt.Sprintf(format, args...))
	}
}

// check verifies the contract's invariants over the database of a finished
// run (no settle process running) and the broker's topics, through
// settle/reconcile: the test reads the topics and the group's offsets and
// gives reconcile them and the workload's model:
//   - every input record (coordinates) has exactly one delivery row, and
//     the outcomes add up to the workload model's (originals settled,
//     duplicates duplicate, conflicts quarantined);
//   - every identity ended as the model expects (settled), exactly once,
//     with exactly the one ledger row of the expected amount, and no
//     identity that was not in the input;
//   - the settlements topic deduplicated by settlement_id holds exactly one
//     message per settled identity that wrote ledger rows, its header
//     agreeing with its body, with a gapless per-account sequence
//     (reconcile: the stored sequences are 1..seq per account, and each
//     message carries its stored one); raw repeats are counted;
//   - every input record has a message on usage.results;
//   - no Kafka commit of the group is ahead of PostgreSQL's consumer_offsets;
//   - every cached balance (and held amount) equals the sum of its rows;
//   - the outbox is fully published;
//   - and every other invariant reconcile checks.
func check(t *testing.T, pool *pgxpool.Pool, brokers []string, group string, w *workload) *findings {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := &findings{}

	// Offsets first: Kafka's commit is read before PostgreSQL's (by
	// reconcile), which only grows, so a live pipeline could not produce a
	// false alarm either.
	f.kafkaOffsets = committed(ctx, t, brokers, group)
	usage, ends := readAllEnds(ctx, t, brokers, "usage")
	f.endOffsets = ends
	// The input the model describes is the whole topic: then "every
	// record below the end offsets" is "every input record".
	var onTopic int64
	for _, e := range ends {
		onTopic += e
	}
	for _, r := range usage {
		if !w.coords[coord{r.Partition, r.Offset}] {
			f.bad("usage: record %d/%d on the topic is not an input record", r.Partition, r.Offset)
		}
	}
	if onTopic != int64(len(w.coords)) {
		f.bad("usage: %d records on the topic, %d input records", onTopic, len(w.coords))
	}

	in := reconcile.Input{Group: group, SourceTopic: "usage", OutboxGrace: time.Nanosecond,
		KafkaOffsets:     map[string]map[int32]int64{"usage": f.kafkaOffsets},
		EndOffsets:       map[string]map[int32]int64{"usage": ends},
		ExpectedOutcomes: map[string]int64{}, ResultsRead: true}
	for outcome, n := range w.outcomes {
		in.ExpectedOutcomes[outcome] = int64(n)
	}
	for _, a := range w.accounts {
		in.ExpectedAccounts = append(in.ExpectedAccounts, reconcile.ExpectedAccount{TenantID: a.Tenant, Subject: a.Subject,
			Currency: a.Currency, Balance: a.Balance.String(), Held: a.Held.String()})
	}
	periods := map[[2]string]bool{} // (tenant, period) compared with the settlements topic
	for id, e := range w.effects {
		// The workload's usage and grants each write one balance row.
		in.ExpectedIdentities = append(in.ExpectedIdentities, reconcile.ExpectedIdentity{TenantID: id.Tenant, Period: id.Period,
			RecordID: id.RecordID, Operation: id.Operation, Outcome: e.Outcome,
			Entries: []reconcile.ExpectedEntry{{Bucket: "balance", Amount: e.Balance.String()}}})
		periods[[2]string{id.Tenant, id.Period}] = true
		f.tenant = id.Tenant
	}

	// One result (at least) per input record.
	for _, r := range readAll(ctx, t, brokers, "usage.results") {
		f.results++
		var res message.Result
		if err := json.Unmarshal(r.Value, &res); err == nil {
			in.Results = append(in.Results, res.Source)
		}
	}

	// The settlements topic, by tenant and period, as reconcile compares
	// it.
	published := map[[2]string][]reconcile.PublishedSettlement{}
	unique := map[string]bool{}
	for _, r := range readAll(ctx, t, brokers, "settlements") {
		f.settlementsRaw++
		var resp message.Response
		if err := json.Unmarshal(r.Value, &resp); err != nil || resp.Identity.TenantID == "" {
			f.bad("settlements: message at %d/%d does not decode as a settlement (%v): %.200s", r.Partition, r.Offset, err, r.Value)
			continue
		}
		unique[resp.SettlementID] = true
		k := [2]string{resp.Identity.TenantID, resp.Identity.AccountPeriod}
		periods[k] = true
		published[k] = append(published[k], reconcile.PublishedSettlement{SettlementID: resp.SettlementID,
			RecordID: resp.Identity.RecordID, Operation: resp.Identity.Operation,
			Source:             message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset},
			HeaderSettlementID: kafkatest.Header(r, "settlement_id"), Sequence: resp.Sequence})
	}
	f.settlementsUnique = len(unique)
	f.settlementsRepeats = f.settlementsRaw - f.settlementsUnique

	store, err := settle.Open(ctx, pool, settle.Config{})
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	seen := map[string]bool{} // a check every run makes reports its finding once
	report := func(in reconcile.Input) {
		t.Helper()
		rep, err := reconcile.Run(ctx, store, in)
		if err != nil {
			t.Fatalf("reconcile tenant=%q period=%q: %v", in.TenantID, in.Period, err)
		}
		for _, c := range rep.Checks {
			// The records came from Kafka, not through the HTTP edge: no
			// Idempotency-Key answers to compare.
			if c.Skipped != "" && in.TenantID == "" && c.Name != "usage_topic_vs_identities" && c.Name != "identities_vs_settlements_topic" &&
				c.Name != "keys_answered_as_stored" {
				f.bad("reconcile: check %s skipped: %s", c.Name, c.Skipped)
			}
		}
		for _, x := range rep.Findings {
			if p := x.Class + ": " + x.Detail; !seen[p] {
				seen[p] = true
				f.bad("%s", p)
			}
		}
	}
	report(in)
	for k := range periods {
		report(reconcile.Input{TenantID: k[0], Period: k[1], Group: group, OutboxGrace: time.Nanosecond,
			Published: published[k], PublishedRead: true, TopicsOnly: true}) // the database was checked as a whole above
	}
	totals, err := reconcile.Count(ctx, store)
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	f.deliveries = totals.Deliveries
	return f
}

// committed returns group's committed offsets of the usage topic.
func committed(ctx context.Context, t *testing.T, brokers []string, group string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets of group %s: %v", group, err)
	}
	out := map[int32]int64{}
	resps.Each(func(r kadm.OffsetResponse) {
		if r.Topic == "usage" && r.Err == nil && r.At >= 0 {
			out[r.Partition] = r.At
		}
	})
	return out
}

// readAll reads every record of topic up to its end offsets at the time of
// the call.
func readAll(ctx context.Context, t *testing.T, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	out, _ := readAllEnds(ctx, t, brokers, topic)
	return out
}

// readAllEnds is readAll, and the end offsets it read to, by partition
// (kafkaread.ToEnd).
func readAllEnds(ctx context.Context, t *testing.T, brokers []string, topic string) ([]*kgo.Record, map[int32]int64) {
	t.Helper()
	var out []*kgo.Record
	o, err := kafkaread.ToEnd(ctx, brokers, []kgo.Opt{kgo.FetchMaxBytes(64 << 20)}, topic, func(r *kgo.Record) { out = append(out, r) })
	if err != nil {
		t.Fatalf("read %s: %d records read: %v", topic, len(out), err)
	}
	return out, o.Ends
}

// waitSettled waits until n deliveries exist, or fails after timeout.
func waitDeliveries(t *testing.T, pool *pgxpool.Pool, n int, timeout time.Duration, alive func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := countDeliveries(t, pool)
		if got >= n {
			return
		}
		if err := alive(); err != nil {
			t.Fatalf("waiting for %d deliveries (have %d): %v", n, got, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %d deliveries (have %d)", timeout, n, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func countDeliveries(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	return int(readProgress(t, pool).Deliveries)
}

func outboxBacklog(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	return int(readProgress(t, pool).Unpublished)
}

// readProgress reads, through reconcile, how far the pipeline has got.
func readProgress(t *testing.T, pool *pgxpool.Pool) reconcile.Progress {
	t.Helper()
	ctx := context.Background()
	store, err := settle.Open(ctx, pool, settle.Config{})
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	p, err := reconcile.ReadProgress(ctx, store)
	if err != nil {
		t.Fatalf("read progress: %v", err)
	}
	return p
}
