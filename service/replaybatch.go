package service

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/settlehq/settle/internal/xerial"
	"github.com/settlehq/settle/outlet"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

// A batch_too_large dead letter holds a whole record batch as the broker
// stored it. Its replay sends the batch's records back one by one, each
// with its own key, value and headers: the batch is decompressed as a
// stream and its records produced in chunks, so no more than a chunk of
// them is ever in memory, however far the batch expands.
const (
	// replayChunkRecords and replayChunkBytes bound the records of a
	// batch produced (and held) at once.
	replayChunkRecords = 1000
	replayChunkBytes   = 16 << 20
	// replayRecordBytesMax bounds one record of a batch: a length past it
	// is not a record the broker would have taken.
	replayRecordBytesMax = 64 << 20
	// replayWindowBytesMax bounds the window a zstd frame may ask for.
	replayWindowBytesMax = 64 << 20
)

// produceBatchLetter produces the records of d, a batch_too_large dead
// letter, to d's source topic and returns where the first went.
func produceBatchLetter(ctx context.Context, o *outlet.Outlet, d inspect.DeadLetter) (message.Coordinates, error) {
	var first *message.Coordinates
	var chunk []*kgo.Record
	size := 0
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		s, _ := o.Produce(ctx, chunk...) // each record's outcome is read here
		for i := range chunk {
			if err := s.Outcome(i); err != nil {
				return err
			}
		}
		if first == nil {
			r := s.Record(0)
			first = &message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		}
		chunk, size = chunk[:0], 0
		return nil
	}
	n := 0
	err := batchRecords(d.Value, func(offset int64, r kmsg.Record) error {
		rec := &kgo.Record{Topic: d.Source.Topic, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: ReplayHeader,
			Value: []byte(d.Source.Topic + "/" + strconv.Itoa(int(d.Source.Partition)) + "/" + strconv.FormatInt(offset, 10))})
		chunk, size, n = append(chunk, rec), size+len(r.Key)+len(r.Value), n+1
		if len(chunk) >= replayChunkRecords || size >= replayChunkBytes {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return message.Coordinates{}, fmt.Errorf("the batch's records from the %dth on: %w", n-len(chunk)+1, err)
	}
	if first == nil {
		return message.Coordinates{}, errors.New("the batch holds no record")
	}
	return *first, nil
}

// batchRecords calls each with every record of raw, a v2 record batch, and
// its offset, decompressing the records as a stream.
func batchRecords(raw []byte, each func(offset int64, r kmsg.Record) error) error {
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		return fmt.Errorf("read the record batch: %w", err)
	}
	if b.Magic != 2 {
		return fmt.Errorf("record batch of magic %d: only 2 is read", b.Magic)
	}
	src, err := decompressor(b.Records, b.Attributes&0x7)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }() // a reader of bytes in memory
	r := bufio.NewReader(src)
	for i := int32(0); i < b.NumRecords; i++ {
		l, err := binary.ReadVarint(r)
		if err != nil {
			return fmt.Errorf("record %d of %d: %w", i+1, b.NumRecords, err)
		}
		if l < 0 || l > replayRecordBytesMax {
			return fmt.Errorf("record %d of %d: length %d", i+1, b.NumRecords, l)
		}
		body := binary.AppendVarint(make([]byte, 0, l+binary.MaxVarintLen64), l)
		at := len(body)
		body = body[:at+int(l)]
		if _, err := io.ReadFull(r, body[at:]); err != nil {
			return fmt.Errorf("record %d of %d: %w", i+1, b.NumRecords, err)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(body); err != nil {
			return fmt.Errorf("record %d of %d: %w", i+1, b.NumRecords, err)
		}
		if err := each(b.FirstOffset+int64(rec.OffsetDelta), rec); err != nil {
			return err
		}
	}
	return nil
}

// decompressor returns a stream of the records of a batch compressed with
// codec (the batch's attributes' low bits).
func decompressor(compressed []byte, codec int16) (io.ReadCloser, error) {
	in := bytes.NewReader(compressed)
	switch codec {
	case 0:
		return io.NopCloser(in), nil
	case 1:
		return gzip.NewReader(in)
	case 2:
		// Raw snappy is one block: decoded whole, which snappy's ratio
		// bounds (about 21 times the batch, itself under the broker's
		// message limit). The Java producer's xerial framing is blocks.
		out, err := xerial.Decode(compressed, math.MaxInt)
		return io.NopCloser(bytes.NewReader(out)), err
	case 3:
		return io.NopCloser(lz4.NewReader(in)), nil
	case 4:
		d, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(replayWindowBytesMax))
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}
