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
