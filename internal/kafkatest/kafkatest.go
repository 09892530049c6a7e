// Package kafkatest runs an in-process Kafka-protocol broker (franz-go's
// kfake) on loopback for tests, and reads and writes its topics. It is test
// support only: production code must never import it.
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/settlehq/settle/settle/message"
)

// Cluster is a running in-process broker.
type Cluster struct {
	*kfake.Cluster
	Brokers []string
	// Opts are the options it was started with: kfake.NewCluster(Opts...)
	// starts it again (with kfake.DataDir, on the data it left).
	Opts []kfake.Opt
}

// NewCluster starts a one-broker cluster on a free loopback port with the
// pipeline's topics (usage with usagePartitions partitions) and a minimum
// group session timeout short enough for tests (~1 s session timeouts);
// extra options (more brokers, TLS, SASL, a data directory) apply after
// those. It is closed at cleanup. It is the one way a test starts a broker.
func NewCluster(t testing.TB, usagePartitions int32, extra ...kfake.Opt) *Cluster {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		kfake.SeedTopics(usagePartitions, message.TopicUsage),
		kfake.SeedTopics(1, message.TopicResults, message.TopicDeadLetters, message.TopicSettlements)}
	opts = append(opts, extra...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kafkatest: start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return &Cluster{Cluster: c, Brokers: c.ListenAddrs(), Opts: opts}
}

// Produce publishes records synchronously, to the partition each names.
func (c *Cluster) Produce(t testing.TB, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// A bound, not an expectation: the fault tier's workloads produce
	// 100,000 records at once.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("kafkatest: produce: %v", err)
	}
}

// SetTopicConfig sets one config of topic on the broker (an incremental
// alter, as kadm does it), e.g. max.message.bytes for a test of what the
// broker refuses.
func (c *Cluster) SetTopicConfig(t testing.TB, topic, key, value string) {
	t.Helper()
	adm, ctx, done := c.admin(t)
	defer done()
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: &value}}, topic)
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = resps.On(topic, nil); err == nil {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatalf("kafkatest: set %s=%s on topic %s: %v", key, value, topic, err)
	}
}

// Read returns every record of topic (all partitions, from the start) that
// arrives within wait, stopping early once it has atLeast records (0: read
// for the whole wait).
func (c *Cluster) Read(t testing.TB, topic string, atLeast int, wait time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var out []*kgo.Record
	for atLeast == 0 || len(out) < atLeast {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// Committed returns the group's committed offsets of topic by partition
// (none before the group's first commit). It may be called from any
// goroutine.
func (c *Cluster) Committed(t testing.TB, group, topic string) map[int32]int64 {
	t.Helper()
	adm, ctx, done := c.admin(t)
	defer done()
	out := map[int32]int64{}
	resps, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return out // nothing committed yet
	}
	if err != nil {
		// Errorf, not Fatalf: callers sample offsets from goroutines.
		t.Errorf("kafkatest: fetch offsets of group %s: %v", group, err)
		return out
	}
	resps.Each(func(r kadm.OffsetResponse) {
		if r.Topic == topic && r.Err == nil && r.At >= 0 {
			out[r.Partition] = r.At
		}
	})
	return out
}

// Header returns the value of header key of r ("" when absent).
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// describeGroup is kadm's view of group on the broker.
func describeGroup(ctx context.Context, brokers []string, group string) (*kgo.Client, kadm.DescribedGroups, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, nil, err
	}
	gs, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err != nil {
		cl.Close()
		return nil, nil, err
	}
	return cl, gs, nil
}

// GroupProtocol is the balancer protocol group runs ("" while it has none)
// and its number of members.
func GroupProtocol(ctx context.Context, brokers []string, group string) (protocol string, members int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl, gs, err := describeGroup(ctx, brokers, group)
	if err != nil {
		return "", 0, err
	}
	defer cl.Close()
	g := gs[group]
	return g.Protocol, len(g.Members), g.Err
}

// DescribeGroup says, for a failure report, the group's state and which
// member holds which partitions.
func DescribeGroup(ctx context.Context, brokers []string, group string) string {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cl, gs, err := describeGroup(ctx, brokers, group)
	if err != nil {
		return "describe group: " + err.Error()
	}
	defer cl.Close()
	var b strings.Builder
	for _, g := range gs {
		fmt.Fprintf(&b, "group %s state %s protocol %s err %v;", g.Group, g.State, g.Protocol, g.Err)
		for _, m := range g.Members {
			fmt.Fprintf(&b, " member %s (%s)", m.MemberID, m.ClientHost)
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					fmt.Fprintf(&b, " %s%v", t.Topic, t.Partitions)
				}
			}
			b.WriteString(";")
		}
	}
	return b.String()
}

// RemoveDeadMembers asks the broker to drop every member of group, for a
// caller that knows none of them is alive. It works around kfake, which
// arms a member's session timer only when the JoinGroup answer reaches it:
// a member killed while its join was pending keeps its partitions for ever
// once the next leader syncs, instead of losing them at its session
// timeout as on a real broker (kfake's group.reply skips updateHeartbeat
// when the connection is gone).
func RemoveDeadMembers(ctx context.Context, brokers []string, group string) (removed int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cl, gs, err := describeGroup(ctx, brokers, group)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = group
	for _, g := range gs {
		for _, m := range g.Members {
			rm := kmsg.NewLeaveGroupRequestMember()
			rm.MemberID = m.MemberID
			req.Members = append(req.Members, rm)
		}
	}
	if len(req.Members) == 0 {
		return 0, nil
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if e := kerr.ErrorForCode(resp.ErrorCode); e != nil {
		return 0, e
	}
	return len(req.Members), nil
}

// admin is an admin client of the cluster and a context for one request
// (10 s); done closes both.
func (c *Cluster) admin(t testing.TB) (*kadm.Client, context.Context, func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	return kadm.NewClient(cl), ctx, func() { cancel(); cl.Close() }
}
