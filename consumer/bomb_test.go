package consumer_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/service"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
	"github.com/settlehq/settle/telemetry"
)

// The bombs' sizes: a cap of 2 MiB, so the consumer's memory budget (the
// limit the cap is derived from) is 32 MiB, and batches of valid grants
// that decompress to 48 MiB, more than the budget.
const (
	bombCap          = 2 << 20
	bombBudget       = bombCap * consumer.DecompressBudgetShare
	bombRecords      = 800
	bombRecordValue  = 60 << 10 // each grant under the decoder's 64 KiB
	bombTopicMsgSize = 8 << 20  // the usage topic takes the snappy bomb (≈ 2.3 MB)
)

// bombBatch builds a batch of n valid grants (record ids prefix-0...),
// each about size bytes, compressed with codec.
func bombBatch(t *testing.T, codec, prefix string, n, size int) []byte {
	return kafkatest.RecordBatch(t, codec, n, func(i int) []byte { return grantValue(fmt.Sprintf("%s-%d", prefix, i), size) })
}

// grantValue is a valid grant of 5 whose value is padded to about size
// bytes.
func grantValue(id string, size int) []byte {
	v := usage("record_id", id, "kind", "grant", "amount", "5",
		"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil,
		"attributes", map[string]any{"pad": ""})
	return bytes.Replace(v, []byte(`"pad":""`), []byte(`"pad":"`+strings.Repeat("x", max(0, size-len(v)))+`"`), 1)
}

func grant(p int32, id string) *kgo.Record {
	return rec(p, usage("record_id", id, "kind", "grant", "amount", "5",
		"meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil))
}

// TestCompressedBombSkippedDurably: a zstd batch of 800 valid grants whose
// frame does not declare its size, 48 MiB decompressed, sits between
// grants of partition 0 of two. The consumer (cap 2 MiB) dead-letters it
// as one letter, batch_too_large, holding the batch's bytes, and moves the
// partition past it: in PostgreSQL in the letter's transaction, then in
// Kafka; the grants behind it settle, /readyz's list names it, and the
// metric counts it. Another member joining (a rebalance) and both members
// stopped and a new one started (a restart) read on from there: the grants
// produced later settle, the batch is not dead-lettered again.
// Against the code before the skip, the partition stalled behind the batch
// for good and no dead letter was written.
func TestCompressedBombSkippedDurably(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	k.SetTopicConfig(t, "usage", "max.message.bytes", strconv.Itoa(bombTopicMsgSize))
	s := settletest.NewStore(t, settle.Config{})
	k.Produce(t, grant(0, "before"))
	bomb := bombBatch(t, "zstd-unsized", "bomb", bombRecords, bombRecordValue)
	k.ProduceBatch(t, "usage", 0, bomb) // offsets 1..800
	k.Produce(t, grant(0, "after"), grant(1, "beside"))

	tel, err := telemetry.NewForTest(tracetest.NewSpanRecorder())
	if err != nil {
		t.Fatal(err)
	}
	cfg := consumerConfig(t, k, "bomb")
	cfg.DecompressBatchBytesMax, cfg.Metrics = bombCap, tel.Metrics
	a, stopA := runConsumer(t, s, cfg)
	rs := results(t, k, 4)
	if got := rs["0/1"]; got.Outcome != message.OutcomeDeadLettered || got.Reason != message.ReasonBatchTooLarge {
		t.Errorf("the batch's result: %s %s, want dead_lettered batch_too_large", got.Outcome, got.Reason)
	}
	for _, at := range []string{"0/0", "0/801", "1/0"} {
		if rs[at].Outcome != message.OutcomeSettled {
			t.Errorf("record at %s: %s %s, want settled", at, rs[at].Outcome, rs[at].Reason)
		}
	}
	ds, err := inspect.New(s).DeadLetters(context.Background(), inspect.DeadLetterFilter{Reason: message.ReasonBatchTooLarge})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 {
		t.Fatalf("%d batch_too_large dead letters, want 1", len(ds))
	}
	var stored kmsg.RecordBatch
	if err := stored.ReadFrom(ds[0].Value); err != nil || !bytes.Equal(stored.Records, bomb[61:]) ||
		ds[0].Source.Offset != 1 || stored.LastOffsetDelta != bombRecords-1 {
		t.Errorf("the letter holds %d bytes at offset %d (read: %v), want the batch's %d compressed bytes at offset 1",
			len(ds[0].Value), ds[0].Source.Offset, err, len(bomb)-61)
	}
	if !strings.Contains(ds[0].Error, "offsets 1 to 800") {
		t.Errorf("the letter's error does not name the batch's offsets: %s", ds[0].Error)
	}
	if sk := a.Skipped(); len(sk) != 1 || sk[0].Offset != 1 || sk[0].NextOffset != 801 || sk[0].Reason != message.ReasonBatchTooLarge {
		t.Errorf("skipped batches: %+v, want the one at 1..800", sk)
	}
	if m := metricLine(t, tel, "settle_batches_skipped_total{"); !strings.Contains(m, `partition="0"`) ||
		!strings.Contains(m, `reason="batch_too_large"`) || !strings.HasSuffix(m, " 1") {
		t.Errorf("the skip's metric: %q", m)
	}
	waitFor(t, 10*time.Second, "offsets of partition 0 past the batch in PostgreSQL and Kafka", func() bool {
		kafka, pg := checkOffsets(t, k, s, "bomb")
		return kafka[0] == 802 && pg[0] == 802
	})

	// A rebalance: a second member joins, and records produced after it
	// settle wherever partition 0 goes.
	b, stopB := runConsumer(t, s, cfg)
	waitFor(t, 20*time.Second, "both members ready", func() bool { return a.Ready() && b.Ready() })
	k.Produce(t, grant(0, "after-rebalance"), grant(1, "beside-rebalance"))
	results(t, k, 6)
	stopA()
	stopB()

	// A restart: a new member reads on from the offsets both hold.
	_, stopC := runConsumer(t, s, cfg)
	defer stopC()
	k.Produce(t, grant(0, "after-restart"))
	rs = results(t, k, 7)
	if got := rs["0/803"]; got.Outcome != message.OutcomeSettled {
		t.Errorf("record produced after the restart: %s %s, want settled", got.Outcome, got.Reason)
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM dead_letters WHERE reason = 'batch_too_large'`); n != 1 {
		t.Errorf("%d batch_too_large dead letters after the rebalance and the restart, want 1", n)
	}

	// The replay sends the batch's 800 grants again, one by one: each
	// settles (the consumer's cap holds for the producer's batches).
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	to, err := service.ProduceDeadLetters(ctx, cl, ds)
	if err != nil || len(to) != 1 || to[0].Topic != "usage" {
		t.Fatalf("replay of the batch: %v, %v", to, err)
	}
	waitFor(t, 60*time.Second, "the batch's 800 grants settled after the replay", func() bool {
		return count(t, s.Pool(), `SELECT count(*) FROM identities WHERE record_id LIKE 'bomb-%'`) == bombRecords
	})
}

// TestCompressedBombEachCodec: a batch of valid grants that decompresses to
// 48 MiB, in each codec Kafka has (gzip, snappy, lz4, zstd with its size
// declared and without), is dead-lettered batch_too_large by the consumer
// (cap 2 MiB) and the grant behind it settles, while the process's heap
// (sampled every millisecond, the collector set to run at 10 % growth so
// that the heap is close to what is live) stays under the consumer's
// budget of 32 MiB above where it started: the in-process broker's and
// the database driver's copies of the compressed batch included. Not
// parallel: it measures the process. Against the code before (the client's
// default cap of 1 GiB) each bomb was decompressed whole and no dead letter
// written; with the client's own decompressor under a cap, zstd with its
// size declared stalled its partition ("window size exceeded").
func TestCompressedBombEachCodec(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd", "zstd-unsized"} {
		t.Run(codec, func(t *testing.T) {
			k := kafkatest.NewCluster(t, 1)
			k.SetTopicConfig(t, "usage", "max.message.bytes", strconv.Itoa(bombTopicMsgSize))
			s := settletest.NewStore(t, settle.Config{})
			k.ProduceBatch(t, "usage", 0, bombBatch(t, codec, codec, bombRecords, bombRecordValue))
			k.Produce(t, grant(0, "after"))

			cfg := consumerConfig(t, k, "bomb-"+codec)
			cfg.DecompressBatchBytesMax = bombCap
			runtime.GC()
			base, peak := heapSampler(t)
			_, stop := runConsumer(t, s, cfg)
			defer stop()
			waitFor(t, 20*time.Second, "the batch's dead letter and the grant behind it", func() bool {
				return count(t, s.Pool(), `SELECT count(*) FROM dead_letters WHERE reason = 'batch_too_large'`) == 1 &&
					count(t, s.Pool(), `SELECT count(*) FROM identities WHERE record_id = 'after'`) == 1
			})
			got := peak() - base
			t.Logf("%s: heap peak %.1f MiB above its start", codec, float64(got)/(1<<20))
			if got > bombBudget {
				t.Errorf("%s: the heap peaked %d MiB above its start, more than the consumer's budget of %d MiB",
					codec, got>>20, bombBudget>>20)
			}
		})
	}
}

// heapSampler samples the heap's objects every millisecond until the test
// ends; it returns the heap now and a function that returns the highest
// sample so far.
func heapSampler(t *testing.T) (base uint64, peak func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base = read()
	var high atomic.Uint64
	high.Store(base)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if v := read(); v > high.Load() {
					high.Store(v)
				}
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return base, high.Load
}

// metricLine returns the line of tel's /metrics that starts with prefix.
func metricLine(t *testing.T, tel *telemetry.Telemetry, prefix string) string {
	t.Helper()
	w := httptest.NewRecorder()
	tel.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for _, l := range strings.Split(w.Body.String(), "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUnreadableBatchStallsVisibly: a batch whose CRC and length are right
// but whose zstd data does not decode reaches the client as a plain fetch
// error that names no offset (franz-go fetches the partition again at
// every fetch, and moves nothing). Settle does not guess past it: the
// partition holds, the other partitions settle, and Ready says which
// partition is unreadable, since when and why, until an operator moves it.
// Against the code before, Ready stayed true and only a warning was logged.
func TestUnreadableBatchStallsVisibly(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	s := settletest.NewStore(t, settle.Config{})
	raw := bombBatch(t, "zstd", "garbage", 1, 100)
	for i := 61; i < len(raw); i++ { // the zstd data, after the magic number
		if i >= 65 {
			raw[i] ^= 0x5a
		}
	}
	kafkatest.SetBatchCRC(raw)
	k.ProduceBatch(t, "usage", 0, raw)
	k.Produce(t, grant(0, "behind"), grant(1, "beside"))

	c, stop := runConsumer(t, s, consumerConfig(t, k, "unreadable"))
	defer stop()
	rs := results(t, k, 1)
	if got := rs["1/0"]; got.Outcome != message.OutcomeSettled {
		t.Errorf("the other partition's grant: %s %s, want settled", got.Outcome, got.Reason)
	}
	waitFor(t, 10*time.Second, "not ready, naming partition 0", func() bool {
		return !c.Ready() && strings.Contains(c.NotReadyReason(), "partition usage/0 unreadable")
	})
	if n := count(t, s.Pool(), `SELECT count(*) FROM identities WHERE record_id = 'behind'`); n != 0 {
		t.Errorf("the grant behind the unreadable batch settled (%d): the consumer skipped a batch it could not read", n)
	}
}
