package kafkatest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// RecordBatch builds a v2 record batch of n records (no keys, no headers)
// whose values value gives, compressed with codec ("gzip", "snappy",
// "lz4", "zstd", or "zstd-unsized": a zstd stream whose frame does not
// declare its size, with a 1 MiB window), with its length and CRC as a
// broker checks them: a batch written by hand, for what a producer would
// not write (a decompression bomb, a corrupt batch).
func RecordBatch(t testing.TB, codec string, n int, value func(i int) []byte) []byte {
	t.Helper()
	var records []byte
	for i := range n {
		records = appendRecord(records, i, value(i))
	}
	compressed, attrs := compress(t, codec, records)
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
		LastOffsetDelta: int32(n - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: compressed}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	SetBatchCRC(raw)
	return raw
}

// SetBatchCRC sets the CRC of raw, a v2 record batch, to match its bytes.
func SetBatchCRC(raw []byte) {
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
}

// ProduceBatch appends raw, a record batch as RecordBatch builds it, to
// topic's partition as the broker takes it from a producer.
func (c *Cluster) ProduceBatch(t testing.TB, topic string, partition int32, raw []byte) {
	t.Helper()
	// Produce versions before 13 name the topic, not its id.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxVersions(kversion.V3_7_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("kafkatest: produce the batch: %v", err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		t.Fatalf("kafkatest: produce the batch: %v", err)
	}
}

// appendRecord appends one v2 record (no key, no headers) at offsetDelta.
func appendRecord(dst []byte, offsetDelta int, value []byte) []byte {
	var body []byte
	body = append(body, 0)                               // attributes
	body = binary.AppendVarint(body, 0)                  // timestamp delta
	body = binary.AppendVarint(body, int64(offsetDelta)) // offset delta
	body = binary.AppendVarint(body, -1)                 // no key
	body = binary.AppendVarint(body, int64(len(value)))  // value
	body = append(body, value...)                        //
	body = binary.AppendVarint(body, 0)                  // no headers
	return append(binary.AppendVarint(dst, int64(len(body))), body...)
}

// compress compresses records with codec as a producer would, except
// "zstd-unsized": a zstd stream whose frame does not declare its size.
func compress(t testing.TB, codec string, records []byte) ([]byte, int16) {
	t.Helper()
	var buf bytes.Buffer
	switch codec {
	case "gzip":
		w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		writeAll(t, w, records)
		return buf.Bytes(), 1
	case "snappy":
		return s2.EncodeSnappy(nil, records), 2
	case "lz4":
		writeAll(t, lz4.NewWriter(&buf), records)
		return buf.Bytes(), 3
	case "zstd":
		enc, _ := zstd.NewWriter(nil)
		defer func() { _ = enc.Close() }() // an encoder of bytes in memory
		return enc.EncodeAll(records, nil), 4
	case "zstd-unsized":
		// The window within the cap: only the decoder's running count
		// stops the frame (a larger window is refused as such, with a
		// plain error).
		w, _ := zstd.NewWriter(&buf, zstd.WithWindowSize(1<<20))
		writeAll(t, w, records)
		b := buf.Bytes()
		// Frame header descriptor: no Frame_Content_Size field when its
		// flag is 0 and the frame is not single-segment.
		if fhd := b[4]; fhd>>6 != 0 || fhd&0x20 != 0 {
			t.Fatalf("the zstd stream declares its content size (descriptor %08b)", fhd)
		}
		return b, 4
	}
	t.Fatalf("codec %s", codec)
	return nil, 0
}

func writeAll(t testing.TB, w io.WriteCloser, b []byte) {
	t.Helper()
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
