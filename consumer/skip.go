package consumer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/settlehq/settle/settle/message"
)

// A compressed record batch decompresses into one allocation before any of
// its records is seen, and a small batch can claim a great deal (a 461 KB
// zstd batch of valid grants expands to 1.1 GB). The Kafka client refuses a
// batch past its MaxDecompressBatchBytes and then stops fetching the
// partition until it is moved past the batch: this file moves it, durably.
//
// The batch is read again as the broker stores it (compressed, with a raw
// Fetch of that one batch), and settled as one input that stands for the
// whole batch (message.Input.Batch): one dead letter, reason
// batch_too_large, holding the batch's bytes, in the transaction that moves
// the partition's next offset in PostgreSQL past the batch. Only then is
// the client moved past it (SetOffsets) and the offset committed to Kafka.
// A member that takes the partition over, or this one after a restart,
// resumes from PostgreSQL's offset (adjustOffsets), so the skip holds; one
// that reads the batch again before its commit reached Kafka finds the dead
// letter by its coordinates and repeats its result. `settle dlq replay`
// sends the batch's records again one by one, decompressed as a stream.

// DecompressBudgetShare is the part of the process's memory limit one
// batch may decompress to: a gzip or lz4 batch grows a buffer by doubling
// and is then copied (about three times the cap at its peak), and one
// decompression may run per broker at once. With the default soft limit
// of 384 MiB the cap is 24 MiB.
const DecompressBudgetShare = 16

// Bounds of the cap derived from the memory limit: below the floor a
// legitimate batch of a few thousand records is refused; the ceiling holds
// when the process has no limit.
const (
	decompressBatchBytesFloor   = 4 << 20
	decompressBatchBytesCeiling = 64 << 20
)

// DecompressBatchBytesFor returns the decompression cap for a process whose
// memory limit is limit bytes (math.MaxInt64: none): limit /
// DecompressBudgetShare, between 4 MiB and 64 MiB.
func DecompressBatchBytesFor(limit int64) int {
	if limit <= 0 || limit == math.MaxInt64 {
		return decompressBatchBytesCeiling
	}
	return int(min(max(limit/DecompressBudgetShare, decompressBatchBytesFloor), decompressBatchBytesCeiling))
}

// memoryLimit is the process's soft memory limit (GOMEMLIMIT, or what
// `settle --memory-limit-mib` set): math.MaxInt64 when it has none.
func memoryLimit() int64 { return debug.SetMemoryLimit(-1) }

// SkippedBatch is a record batch the consumer dead-lettered whole and moved
// its partition past, for /readyz.
type SkippedBatch struct {
	Topic      string    `json:"topic"`
	Partition  int32     `json:"partition"`
	Offset     int64     `json:"offset"`      // the batch's first offset
	NextOffset int64     `json:"next_offset"` // where the partition resumed
	Reason     string    `json:"reason"`
	At         time.Time `json:"at"`
}

// skippedMax bounds the skipped batches remembered for /readyz.
const skippedMax = 16

// fetchFailingFor is how recent a partition's last fetch error must be for
// the partition to count as unreadable: the client fetches a partition that
// fails for a reason it does not retry by itself (a batch whose CRC or
// length is wrong) again at every fetch, so while it fails the errors keep
// coming.
const fetchFailingFor = 30 * time.Second

// fetchHealth is what the consumer's fetches said lately: the batches
// skipped, and per partition the last fetch error (a map of at most the
// partitions of the topic).
type fetchHealth struct {
	mu      sync.Mutex
	skipped []SkippedBatch
	failing map[topicPartition]fetchFailure
}

type topicPartition struct {
	topic     string
	partition int32
}

type fetchFailure struct {
	err         error
	since, last time.Time
}

func (h *fetchHealth) skip(b SkippedBatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.skipped) == skippedMax {
		h.skipped = append(h.skipped[:0], h.skipped[1:]...)
	}
	h.skipped = append(h.skipped, b)
}

// failed notes a failed fetch of tp; it reports whether tp was readable
// until now.
func (h *fetchHealth) failed(tp topicPartition, err error, now time.Time) (first bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing == nil {
		h.failing = map[topicPartition]fetchFailure{}
	}
	f, ok := h.failing[tp]
	if !ok || now.Sub(f.last) > fetchFailingFor {
		f.since, first = now, true
	}
	f.err, f.last = err, now
	h.failing[tp] = f
	return first
}

// read forgets the failure of a partition that returned records.
func (h *fetchHealth) read(tp topicPartition) {
	h.mu.Lock()
	if h.failing != nil {
		delete(h.failing, tp)
	}
	h.mu.Unlock()
}

// notReadable says which partitions failed their fetches lately.
func (h *fetchHealth) notReadable(now time.Time) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for tp, f := range h.failing {
		if now.Sub(f.last) > fetchFailingFor {
			delete(h.failing, tp)
			continue
		}
		return fmt.Sprintf("partition %s/%d unreadable since %s: %v; the client fetches it again, nothing after it settles until an operator moves the partition past the batch (see docs/operations.md)",
			tp.topic, tp.partition, f.since.UTC().Format(time.RFC3339), f.err)
	}
	return ""
}

// Skipped returns the batches this consumer dead-lettered whole and moved
// past (the last 16), oldest first.
func (c *Consumer) Skipped() []SkippedBatch {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	return append([]SkippedBatch{}, c.health.skipped...)
}

// fetchErrors sorts a poll's fetch errors: the batches too large to
// decompress are returned, to be skipped; any other error is logged,
// counted and kept for Ready.
func (c *Consumer) fetchErrors(fetches kgo.Fetches) []*kgo.ErrDecompressTooLarge {
	var tooLarge []*kgo.ErrDecompressTooLarge
	now := time.Now()
	fetches.EachError(func(topic string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		if e, ok := errors.AsType[*kgo.ErrDecompressTooLarge](err); ok {
			tooLarge = append(tooLarge, e)
			return
		}
		c.cfg.Metrics.FetchError(context.Background(), topic, p)
		// A batch the client cannot read fails every fetch (tens a
		// second): its first failure is an error in the log, the rest
		// are counted.
		if c.health.failed(topicPartition{topic, p}, err, now) {
			c.log.Error("fetch failed; the client fetches the partition again, and nothing after the failing batch settles until it reads",
				"topic", topic, "partition", p, "err", err)
		}
	})
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) > 0 {
			c.health.read(topicPartition{p.Topic, p.Partition})
		}
	})
	return tooLarge
}

// skipBatch dead-letters the batch e names and moves its partition past it
// (see the top of this file). It runs inside a poll. When it cannot finish
// (the batch cannot be fetched raw, the database stays away past a
// rebalance), the client is set back on the batch, which it then fetches
// again and refuses again: the skip is tried anew.
func (c *Consumer) skipBatch(ctx context.Context, abandon <-chan struct{}, cl *kgo.Client, member string, e *kgo.ErrDecompressTooLarge) {
	log := c.log.With("topic", e.Topic, "partition", e.Partition, "offset", e.Offset, "next_offset", e.NextOffset)
	retry := func(err error) {
		c.health.failed(topicPartition{e.Topic, e.Partition}, fmt.Errorf("batch at offset %d too large to decompress, not dead-lettered yet: %w", e.Offset, err), time.Now())
		log.Error("could not dead-letter a batch too large to decompress; it will be fetched and tried again", "err", err)
		cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{e.Topic: {e.Partition: {Epoch: -1, Offset: e.Offset}}})
	}
	raw, err := fetchBatch(ctx, cl, e.Topic, e.Partition, e.Offset)
	if err != nil {
		retry(err)
		return
	}
	why := fmt.Sprintf("the record batch at offsets %d to %d (%d bytes compressed with %s) decompresses to more than the consumer's limit of %d bytes; "+
		"its records were not read: replay them with settle dlq replay",
		e.Offset, e.NextOffset-1, len(raw), batchCodec(raw), c.cfg.DecompressBatchBytesMax)
	in := message.Input{Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Value: raw,
		Batch: &message.SkippedBatch{NextOffset: e.NextOffset, Err: why}}
	results, err := c.settleWaiting(ctx, abandon, []message.Input{in})
	if err != nil {
		retry(err)
		return
	}
	if err := c.awaitPublish(ctx, abandon, c.publishAsync(ctx, results)); err != nil {
		// Settled: the result is repeated from PostgreSQL when the
		// batch is read again.
		retry(err)
		return
	}
	c.count(results)
	next := map[string]map[int32]kgo.EpochOffset{e.Topic: {e.Partition: {Epoch: e.Epoch, Offset: e.NextOffset}}}
	cl.SetOffsets(next)
	c.commits.committed(next, c.commit(ctx, cl, next, member, 10*time.Second))
	c.health.read(topicPartition{e.Topic, e.Partition})
	c.cfg.Metrics.BatchSkipped(ctx, e.Topic, e.Partition, message.ReasonBatchTooLarge)
	c.health.skip(SkippedBatch{Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, NextOffset: e.NextOffset,
		Reason: message.ReasonBatchTooLarge, At: time.Now()})
	log.Error("record batch too large to decompress: dead-lettered whole (batch_too_large) and skipped; replay it with settle dlq replay",
		"compressed_bytes", len(raw), "limit_bytes", c.cfg.DecompressBatchBytesMax)
}

// fetchBatchBytesMax is how much a raw fetch of one batch asks for; the
// broker returns the first batch whole even when it is larger.
const fetchBatchBytesMax = 1 << 20

// fetchBatch returns the record batch of topic/partition that holds offset,
// as the broker stores it (compressed), with one Fetch to the partition's
// leader that the client does not decompress.
func fetchBatch(ctx context.Context, cl *kgo.Client, topic string, partition int32, offset int64) ([]byte, error) {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	var topicID [16]byte
	leader := int32(-1)
	for _, t := range mresp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, fmt.Errorf("metadata of %s: %w", topic, err)
		}
		topicID = t.TopicID
		for _, p := range t.Partitions {
			if p.Partition == partition {
				leader = p.Leader
			}
		}
	}
	if leader < 0 {
		return nil, fmt.Errorf("no leader for %s/%d", topic, partition)
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.ReplicaID = -1
	freq.MaxWaitMillis = 0
	freq.MinBytes = 1
	freq.MaxBytes = fetchBatchBytesMax
	freq.SessionEpoch = -1 // a full fetch, outside any fetch session
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, topicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = partition, offset, fetchBatchBytesMax
	fp.CurrentLeaderEpoch, fp.LogStartOffset = -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	resp, err := cl.Broker(int(leader)).Request(ctx, freq)
	if err != nil {
		return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, offset, err)
	}
	fresp, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return nil, fmt.Errorf("fetch %s/%d at %d: a response of type %T", topic, partition, offset, resp)
	}
	if err := kerr.ErrorForCode(fresp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, offset, err)
	}
	for _, t := range fresp.Topics {
		for _, p := range t.Partitions {
			if p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, offset, err)
			}
			if b := batchAt(p.RecordBatches, offset); b != nil {
				return b, nil
			}
		}
	}
	return nil, fmt.Errorf("fetch %s/%d at %d: the broker returned no batch holding the offset", topic, partition, offset)
}

// batchAt returns a copy of the record batch in raw (a fetch response's
// batches, the last possibly cut short) that holds offset.
func batchAt(raw []byte, offset int64) []byte {
	for len(raw) >= 61 { // a v2 batch header
		first := int64(binary.BigEndian.Uint64(raw))
		n := int(int32(binary.BigEndian.Uint32(raw[8:]))) + 12
		if n < 61 || n > len(raw) {
			return nil
		}
		last := first + int64(int32(binary.BigEndian.Uint32(raw[23:])))
		if raw[16] == 2 && first <= offset && offset <= last {
			return append([]byte(nil), raw[:n]...)
		}
		raw = raw[n:]
	}
	return nil
}

// batchCodec names the compression of a raw v2 record batch.
func batchCodec(raw []byte) string {
	if len(raw) < 23 {
		return "unknown"
	}
	switch binary.BigEndian.Uint16(raw[21:]) & 0x7 {
	case 0:
		return "none"
	case 1:
		return "gzip"
	case 2:
		return "snappy"
	case 3:
		return "lz4"
	case 4:
		return "zstd"
	}
	return "unknown"
}
