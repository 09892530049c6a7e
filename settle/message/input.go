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

// Coordinates names the Kafka record in came from.
func (in *Input) Coordinates() Coordinates {
	return Coordinates{Topic: in.Topic, Partition: in.Partition, Offset: in.Offset}
}

// DeadLetterValueTruncatedHeader names the header of a dead-letter message
// sent without its value (longer than settle.Config.DeadLetterValueBytesMax); its value
// is the original length in bytes, in decimal.
const DeadLetterValueTruncatedHeader = "dlq_value_truncated"
