package kafkaread_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/kafkaread"
	"github.com/settlehq/settle/internal/kafkatest"
)

// TestToEndReadsEveryRecordToTheListedEnds: a topic of two partitions is
// read whole, each partition in offset order, and the offsets returned are
// where each partition began and ended.
func TestToEndReadsEveryRecordToTheListedEnds(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: "usage", Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))})
	}
	k.Produce(t, recs...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	next := map[int32]int64{}
	n := 0
	o, err := kafkaread.ToEnd(ctx, k.Brokers, nil, "usage", func(r *kgo.Record) {
		if r.Offset != next[r.Partition] {
			t.Errorf("partition %d: offset %d read after %d", r.Partition, r.Offset, next[r.Partition]-1)
		}
		next[r.Partition] = r.Offset + 1
		n++
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 || o.Ends[0] != 3 || o.Ends[1] != 2 || o.Starts[0] != 0 || o.Starts[1] != 0 {
		t.Errorf("%d records read, offsets %+v; want 5, ends 3 and 2 from 0", n, o)
	}
}

// TestReaderBeginsWhereItIsTold: a read from offset 2 of partition 0 reads
// that partition's records from there and partition 1's whole, and is told
// the offsets before the first record. Seen failing with From ignored (5
// records read).
func TestReaderBeginsWhereItIsTold(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	var recs []*kgo.Record
	for i := range 6 {
		recs = append(recs, &kgo.Record{Topic: "usage", Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))})
	}
	k.Produce(t, recs...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var listed *kafkaread.Offsets
	var got []int64
	r := kafkaread.Reader{From: map[int32]int64{0: 2}, Listed: func(o kafkaread.Offsets) { listed = &o }}
	o, err := r.ToEnd(ctx, k.Brokers, nil, "usage", func(rec *kgo.Record) {
		if listed == nil {
			t.Error("a record was read before the offsets were told")
		}
		if rec.Partition == 0 {
			got = append(got, rec.Offset)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != 2 || o.From[0] != 2 || o.From[1] != 0 || o.Ends[0] != 3 || o.Starts[0] != 0 {
		t.Errorf("partition 0 read at %v, offsets %+v; want [2], from 2 and 0, ends 3, starts 0", got, o)
	}
}
