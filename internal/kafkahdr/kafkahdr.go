// Package kafkahdr converts record headers between the Kafka client's form
// (kgo.RecordHeader) and the settlement core's (record.Header): one
// function per direction, for every place a record crosses between Kafka
// and settle — the consumer (records in), the relay (outbox rows out),
// package service (dead-letter replay) and cmd/settle (reconciliation
// against a topic).
//
// It is its own package because no other may own it: fingerprint must
// know nothing of Kafka, settle speaks only SQL, and the consumer and the
// relay must not import each other, nor either the service above them. It
// holds no state, does no I/O and never copies a header's value: the
// result shares the bytes of its input.
package kafkahdr

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/record"
)

// FromKafka returns a Kafka record's headers as the settlement core takes
// them, in order (a non-nil, empty slice for none).
func FromKafka(hs []kgo.RecordHeader) []record.Header {
	out := make([]record.Header, len(hs))
	for i, h := range hs {
		out[i] = record.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// ToKafka returns headers of the settlement core as a Kafka record carries
// them, in order (nil for none).
func ToKafka(hs []record.Header) []kgo.RecordHeader {
	if len(hs) == 0 {
		return nil
	}
	out := make([]kgo.RecordHeader, len(hs))
	for i, h := range hs {
		out[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return out
}
