package consumer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// TestOversizedRecordDoesNotPoisonTheRelay: a 2 MiB usage record (the
// usage topic takes it; usage.dlq keeps the broker's default limit of
// about 1 MB) goes through the consumer and the relay on a real broker. It
// is dead-lettered too_large; its dead-letter message reaches usage.dlq
// without its value and with dlq_value_truncated naming the original
// length, while the dead_letters row keeps every byte; and the
// settlements behind it each reach the settlements topic exactly once.
func TestOversizedRecordDoesNotPoisonTheRelay(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 1)
	k.SetTopicConfig(t, "usage", "max.message.bytes", strconv.Itoa(8<<20))
	s := settletest.NewStore(t, settle.Config{})

	big := usage("record_id", "big", "attributes", map[string]any{"pad": strings.Repeat("x", 2<<20)})
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(8<<20))
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = cl.ProduceSync(pctx, rec(0, big)).FirstErr()
	cancel()
	cl.Close()
	if err != nil {
		t.Fatalf("produce the 2 MiB record: %v", err)
	}
	const n = 5
	var grants []*kgo.Record
	for i := range n {
		grants = append(grants, rec(0, usage("record_id", fmt.Sprintf("g-%d", i), "kind", "grant", "amount", "5",
			"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)))
	}
	k.Produce(t, grants...)

	_, stopConsumer := runConsumer(t, s, consumerConfig(t, k, "oversize"))
	defer stopConsumer()
	r, stopRelay := runRelay(t, s, k)
	defer stopRelay()

	rs := results(t, k, n+1)
	if got := rs["0/0"]; got.Outcome != message.OutcomeDeadLettered || got.Reason != "too_large" {
		t.Errorf("the 2 MiB record: %s %s, want dead_lettered too_large", got.Outcome, got.Reason)
	}
	// Read on for a while once every settlement is there: a relay that
	// retries the dead letter publishes the settlements again.
	k.Read(t, "settlements", n, 20*time.Second)
	sets := k.Read(t, "settlements", 0, 1500*time.Millisecond)
	seen := map[string]int{}
	for _, m := range sets {
		seen[kafkatest.Header(m, "settlement_id")]++
	}
	if len(sets) != n || len(seen) != n {
		t.Errorf("settlements: %d messages, %d distinct settlement ids, want %d of each (each exactly once): %v", len(sets), len(seen), n, seen)
	}

	dlq := k.Read(t, "usage.dlq", 1, 10*time.Second)
	if len(dlq) != 1 {
		t.Fatalf("usage.dlq has %d messages, want 1", len(dlq))
	}
	m := dlq[0]
	if kafkatest.Header(m, "dlq_reason") != "too_large" || kafkatest.Header(m, "dlq_source_offset") != "0" ||
		kafkatest.Header(m, "origin") != "test" {
		t.Errorf("dead-letter message lost its reason, source or headers: %v", m.Headers)
	}
	if got := kafkatest.Header(m, message.DeadLetterValueTruncatedHeader); got != strconv.Itoa(len(big)) || len(m.Value) != 0 {
		t.Errorf("dead-letter message: %d value bytes, %s=%q; want none and %d", len(m.Value), message.DeadLetterValueTruncatedHeader, got, len(big))
	}
	ds, err := inspect.New(s).DeadLetters(context.Background(), inspect.DeadLetterFilter{Reason: "too_large"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || !bytes.Equal(ds[0].Value, big) {
		t.Errorf("dead_letters: %d too_large rows, want 1 with the record's %d bytes", len(ds), len(big))
	}
	if r.Parked() != 0 {
		t.Errorf("relay parked %d rows: the dead letter should fit the broker's limit", r.Parked())
	}
}

// TestResultRefusedForItsKey: a grant whose Kafka key is about 1 MB (the
// usage topic takes it) settles, and its result, keyed like its input, is
// more than the broker takes on usage.results. It goes out without the key
// and headers, with settle_refused naming why, and the records behind it
// and on another partition get their results: retried for ever, it held
// every partition of the consumer.
func TestResultRefusedForItsKey(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	k.SetTopicConfig(t, "usage", "max.message.bytes", strconv.Itoa(8<<20))
	s := settletest.NewStore(t, settle.Config{})
	grant := func(p int32, id string) *kgo.Record {
		return rec(p, usage("record_id", id, "kind", "grant", "amount", "5",
			"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil))
	}
	big := grant(0, "big-key")
	big.Key = bytes.Repeat([]byte("k"), 1_005_000)
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(8<<20))
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = cl.ProduceSync(pctx, big).FirstErr()
	cancel()
	cl.Close()
	if err != nil {
		t.Fatalf("produce the record with a 1 MB key: %v", err)
	}
	k.Produce(t, grant(0, "after"), grant(1, "beside"))
	_, stop := runConsumer(t, s, consumerConfig(t, k, "bigkey"))
	defer stop()

	ms := k.Read(t, "usage.results", 3, 20*time.Second)
	refused := 0
	for _, m := range ms {
		if r := kafkatest.Header(m, consumer.HeaderRefused); r != "" {
			refused++
			if r != "message_too_large" || m.Key != nil || !bytes.Contains(m.Value, []byte(`"big-key"`)) {
				t.Errorf("the refused result: %s, key %d bytes, %s", r, len(m.Key), m.Value)
			}
		}
	}
	if len(ms) != 3 || refused != 1 {
		t.Fatalf("%d results (want 3), %d of them without their key (want 1)", len(ms), refused)
	}
}

// TestRefusedResultsNeighboursKeepTheirKeys: a result over the results
// topic's limit (its input's 60 KB key; the topic takes 50 KB) is produced
// in one batch with its neighbours, which the broker refuses whole. Only
// the refused result goes out without its key (settle_refused); the
// results beside it keep their keys and partitions, so no key's results
// change order.
//
// Fails against the consumer that published every result of a refused
// batch without its key and headers (2 of 3 results without their key):
// git checkout 40477a1~1 -- consumer/ internal/kafkaerr && git checkout HEAD -- consumer/oversize_test.go && go test -run TestRefusedResultsNeighbours ./consumer; git checkout HEAD -- consumer/ && git rm -rq internal/kafkaerr
func TestRefusedResultsNeighboursKeepTheirKeys(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 1)
	k.SetTopicConfig(t, "usage.results", "max.message.bytes", "50000")
	s := settletest.NewStore(t, settle.Config{})
	grant := func(id, key string) *kgo.Record {
		r := rec(0, usage("record_id", id, "kind", "grant", "amount", "5",
			"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil))
		r.Key = []byte(key)
		return r
	}
	noise := make([]byte, 30_000) // 60 KB as hex: past the limit however it is compressed
	_, _ = rand.Read(noise)
	k.Produce(t, grant("before", "acme/before"), grant("big-key", hex.EncodeToString(noise)), grant("after", "acme/after"))
	_, stop := runConsumer(t, s, consumerConfig(t, k, "neighbours"))
	defer stop()

	ms := k.Read(t, "usage.results", 3, 20*time.Second)
	if len(ms) != 3 {
		t.Fatalf("%d results, want 3", len(ms))
	}
	for _, m := range ms {
		big := bytes.Contains(m.Value, []byte(`"big-key"`))
		refused := kafkatest.Header(m, consumer.HeaderRefused)
		if big != (refused == "message_too_large") || big != (m.Key == nil) {
			t.Errorf("result %.60s...: key %q, settle_refused %q; only the big key's result goes without its key", m.Value, m.Key, refused)
		}
	}
}
