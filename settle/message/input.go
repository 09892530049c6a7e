package message

import (
	"time"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/record"
)

// Input is one input record as it arrived, named by its coordinates.
type Input struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []record.Header
	Timestamp time.Time // the record's own timestamp, for latency

	// Decoded is Value and Headers decoded (record.Decoder.Prepare, or
	// Store.Decode): callers decode, settle settles. Settle refuses an
	// input without it, unless Exhausted is set.
	Decoded *fingerprint.Decoded

	// Exhausted, when set, dead-letters the record as transient_exhausted
	// instead of settling it: the caller retried it past its limit.
	Exhausted *Exhausted

	// Batch, when set, says the input stands for a whole record batch the
	// Kafka client refused to read (Value holds the batch as the broker
	// stored it, compressed; Offset is its first offset): it is
	// dead-lettered batch_too_large, as one letter, and its partition's
	// next offset moves past the batch's last record.
	Batch *SkippedBatch

	// FirstDelivery says that no record was ever delivered at these
	// coordinates before (the records of an Idempotency-Key this attempt
	// claimed first): the batch does not probe them for an earlier
	// delivery. Should another delivery have got there, the keys on its
	// coordinates refuse this one's writes and the next attempt probes.
	FirstDelivery bool
}

// Exhausted says why a record is given up on after bounded retries.
type Exhausted struct {
	Err      string
	Attempts int
}

// SkippedBatch is a record batch given up on without being read.
type SkippedBatch struct {
	NextOffset int64  // the offset after the batch's last record
	Err        string // why it was not read
}

// Undecoded says whether in is dead-lettered without being decoded
// (Exhausted or Batch).
func (in *Input) Undecoded() bool { return in.Exhausted != nil || in.Batch != nil }

// Coordinates names the Kafka record in came from.
func (in *Input) Coordinates() Coordinates {
	return Coordinates{Topic: in.Topic, Partition: in.Partition, Offset: in.Offset}
}

// DeadLetterSourceNextOffsetHeader names the header of a batch_too_large
// dead-letter message that says where its batch ends: the offset after its
// last record, in decimal (dlq_source_offset is its first).
const DeadLetterSourceNextOffsetHeader = "dlq_source_next_offset"

// DeadLetterValueTruncatedHeader names the header of a dead-letter message
// sent without its value (longer than settle.Config.DeadLetterValueBytesMax); its value
// is the original length in bytes, in decimal.
const DeadLetterValueTruncatedHeader = "dlq_value_truncated"
