package consumer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/settletest"
)

// TestCommitFencedToItsMembership: a commit whose poll was made under
// another group membership than the client's is not sent at all; under the
// client's own it is. (With the eager protocol the memberships cannot
// differ inside a poll, so no pipeline test reaches this check.)
func TestCommitFencedToItsMembership(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 1)
	c, err := New(settletest.NewStore(t, settle.Config{}), Config{Brokers: k.Brokers, Group: "fence"})
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	k.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		sent.Add(1)
		return nil, nil, false
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ConsumerGroup("fence"), kgo.ConsumeTopics("usage"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	k.Produce(t, &kgo.Record{Topic: "usage", Partition: 0, Value: []byte("{}")})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for cl.PollFetches(ctx).NumRecords() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the client never joined and fetched the record")
		}
	}
	member, _ := cl.GroupMetadata()
	offsets := map[string]map[int32]kgo.EpochOffset{"usage": {0: {Epoch: -1, Offset: 1}}}

	failed := c.commit(ctx, cl, offsets, member+"-earlier", 5*time.Second)
	if !failed["usage"][0] || sent.Load() != 0 {
		t.Fatalf("a commit of another membership: failed %v, %d commit requests reached the broker, want failed and none", failed, sent.Load())
	}
	if failed := c.commit(ctx, cl, offsets, member, 5*time.Second); len(failed) != 0 || sent.Load() != 1 {
		t.Fatalf("a commit of the client's own membership: failed %v, %d requests, want sent once", failed, sent.Load())
	}
	if got := k.Committed(t, "fence", "usage")[0]; got != 1 {
		t.Fatalf("committed offset %d, want 1", got)
	}
}
