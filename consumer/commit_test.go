package consumer_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/dberr"
	"github.com/settlehq/settle/settle/settletest"
)

// failCommitResponse is req answered with code on every partition.
func failCommitResponse(req *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID // v10+ name topics by ID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// failNextCommit makes the broker answer the next OffsetCommit request with
// REQUEST_TIMED_OUT on every partition, without applying it, and returns
// the offset that request carried for partition 0 (-1 until then).
func failNextCommit(k *kafkatest.Cluster) *atomic.Int64 {
	var failed atomic.Int64
	failed.Store(-1)
	k.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID // v10+ name topics by ID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.RequestTimedOut.Code
				st.Partitions = append(st.Partitions, sp)
				if rp.Partition == 0 { // the test's only topic committed

					failed.Store(rp.Offset)
				}
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true // no KeepControl: only this request fails
	})
	return &failed
}

// TestFailedCommitRetriedWhileIdle: the offset commit of the last batch of
// a backlog fails and no record follows. The consumer commits it again
// while the partition is idle, so Kafka's committed offset (what lag
// tooling and autoscalers read) catches up with PostgreSQL's within
// seconds, instead of staying behind until traffic resumes.
func TestFailedCommitRetriedWhileIdle(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 1)
	s := settletest.NewStore(t, settle.Config{})
	const group = "idle-retry"
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, rec(0, usage("record_id", fmt.Sprintf("u-%d", i))))
		}
		k.Produce(t, recs...)
	}
	produce(0, 3)
	_, stop := runConsumer(t, s, consumerConfig(t, k, group))
	testnet.WaitFor(t, "kafka commit of offset 3", 20*time.Second, func() bool { return k.Committed(t, group, "usage")[0] == 3 })

	failed := failNextCommit(k)
	produce(3, 5) // one batch, one poll, one commit: the one that fails
	testnet.WaitFor(t, "the commit of offset 5 to fail", 20*time.Second, func() bool { return failed.Load() >= 0 })
	if got := failed.Load(); got != 5 {
		t.Fatalf("the failed commit carried offset %d, want 5 (the test needs the last commit of the backlog to fail)", got)
	}
	failedAt := time.Now()
	if _, pg := checkOffsets(t, k, s, group); pg[0] != 5 {
		t.Fatalf("postgres next offset %d after the commit, want 5", pg[0])
	}
	// No new traffic from here on.
	deadline := failedAt.Add(5 * time.Second)
	for {
		kafka, pg := checkOffsets(t, k, s, group)
		if kafka[0] == pg[0] {
			t.Logf("kafka's committed offset caught up with postgres (%d) %s after the failed commit, with no new records",
				kafka[0], time.Since(failedAt).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafka's committed offset is %d, postgres %d, 5s after the failed commit of the partition's last batch: the commit was not retried while idle",
				kafka[0], pg[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if kafka, pg := checkOffsets(t, k, s, group); kafka[0] != 5 || pg[0] != 5 {
		t.Errorf("after stop: kafka %d, postgres %d, want 5 and 5", kafka[0], pg[0])
	}
}

// memberCommits makes the broker refuse the offset commits of one member
// (REQUEST_TIMED_OUT, not applied) while refuse is set. The member is the
// one whose commit or heartbeat the broker sees first once it is installed:
// install it while that member is alone in the group.
type memberCommits struct {
	mu      sync.Mutex
	member  string
	refuse  bool
	refused int // the member's commits refused
	passed  int // the member's commits let through
}

func refuseCommitsOf(k *kafkatest.Cluster) *memberCommits {
	m := &memberCommits{refuse: true}
	k.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		m.mu.Lock()
		defer m.mu.Unlock()
		switch {
		case !m.is(r.MemberID):
		case m.refuse:
			m.refused++
			return failCommitResponse(r, kerr.RequestTimedOut.Code), nil, true
		default:
			m.passed++
		}
		return nil, nil, false
	})
	return m
}

// is reports whether id is the member's, learning it on first sight. m.mu
// must be held.
func (m *memberCommits) is(id string) bool {
	if m.member == "" {
		m.member = id
	}
	return id == m.member
}

func (m *memberCommits) letThrough() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refuse = false
}

func (m *memberCommits) counts() (refused, passed int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused, m.passed
}

// TestOwedCommitDroppedOnRevoke: member A owes Kafka the commits of both
// partitions (every commit of A fails), then B joins and takes one of them,
// commits it and moves on. When A's commits work again, A commits what it
// owes for the partition it kept, and never the one it gave up: that commit
// would move B's offset backwards.
func TestOwedCommitDroppedOnRevoke(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	s := settletest.NewStore(t, settle.Config{})
	const group = "owed-revoke"
	n := 0
	produce := func(partition int32, count int) {
		var recs []*kgo.Record
		for range count {
			n++
			recs = append(recs, rec(partition, usage("record_id", fmt.Sprintf("u-%d", n))))
		}
		k.Produce(t, recs...)
	}
	committed := func() map[int32]int64 { kafka, _ := checkOffsets(t, k, s, group); return kafka }
	produce(0, 3)
	produce(1, 3)
	runConsumer(t, s, consumerConfig(t, k, group)) // A
	testnet.WaitFor(t, "A's commits of 3 and 3", 20*time.Second, func() bool { c := committed(); return c[0] == 3 && c[1] == 3 })

	// From now on every commit of A fails (A is the only member yet).
	aCommits := refuseCommitsOf(k)
	produce(0, 2)
	produce(1, 2)
	testnet.WaitFor(t, "A to settle both partitions to 5 and fail to commit", 20*time.Second, func() bool {
		refused, _ := aCommits.counts()
		_, pg := checkOffsets(t, k, s, group)
		return pg[0] == 5 && pg[1] == 5 && refused >= 2
	})

	runConsumer(t, s, consumerConfig(t, k, group)) // B
	// B takes one partition, reads it again from Kafka's 3 and commits 5.
	var moved int32 = -1
	testnet.WaitFor(t, "B to take a partition and commit it", 30*time.Second, func() bool {
		for p, o := range committed() {
			if o == 5 {
				moved = p
				return true
			}
		}
		return false
	})
	kept := 1 - moved
	produce(moved, 3)
	testnet.WaitFor(t, "B's commit of 8", 20*time.Second, func() bool { return committed()[moved] == 8 })
	if c := committed(); c[kept] != 3 {
		t.Fatalf("partition %d (kept by A, whose commits fail) committed %d, want 3", kept, c[kept])
	}

	aCommits.letThrough()
	// A, idle, commits what it owes for the partition it kept...
	testnet.WaitFor(t, "A's owed commit of the partition it kept", 10*time.Second, func() bool { return committed()[kept] == 5 })
	// ...and nothing for the one it gave up (it owed 5 there, B is at 8).
	until := time.Now().Add(2 * time.Second)
	for time.Now().Before(until) {
		if c := committed(); c[moved] != 8 {
			t.Fatalf("partition %d moved to B: committed offset went from 8 to %d after A's commits worked again", moved, c[moved])
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestZombieCommitFenced: member A owes Kafka a commit (its commits fail),
// then is removed from the group without knowing it (its heartbeats are
// answered by a stand-in and its fetches hang, as for a member that stalled
// while the group moved on). B takes the partition, reads it again and
// commits further. When A's commits reach the broker again, the first is
// refused (UNKNOWN_MEMBER_ID) and makes A rejoin as a new member; an owed
// commit retried while that join is under way is sent by the client under
// the new member's identity once the join completes, before the group has
// taken the partition from A. It must not be sent: it would move the
// group's offset back from B's to A's.
func TestZombieCommitFenced(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 1)
	s := settletest.NewStore(t, settle.Config{})
	const group = "zombie"
	n := 0
	produce := func(count int) {
		var recs []*kgo.Record
		for range count {
			n++
			recs = append(recs, rec(0, usage("record_id", fmt.Sprintf("u-%d", n))))
		}
		k.Produce(t, recs...)
	}
	committed := func() int64 { kafka, _ := checkOffsets(t, k, s, group); return kafka[0] }

	produce(3)
	aCfg := consumerConfig(t, k, group)
	aCfg.ClientOpts = []kgo.Opt{kgo.Rack("zombie")} // names A's fetches
	runConsumer(t, s, aCfg)
	testnet.WaitFor(t, "A's commit of 3", 20*time.Second, func() bool { return committed() == 3 })

	aCommits := refuseCommitsOf(k) // A is alone in the group
	k.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		r := req.(*kmsg.HeartbeatRequest)
		aCommits.mu.Lock()
		defer aCommits.mu.Unlock()
		if aCommits.is(r.MemberID) { // A is told all is well
			return r.ResponseKind(), nil, true
		}
		return nil, nil, false
	})
	produce(2)
	testnet.WaitFor(t, "A to settle 5 and owe its commit", 20*time.Second, func() bool {
		_, pg := checkOffsets(t, k, s, group)
		return pg[0] == 5 && committed() == 3
	})
	holdFetch := make(chan struct{})
	k.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		if req.(*kmsg.FetchRequest).Rack == "zombie" {
			k.SleepControl(func() { <-holdFetch })
		}
		return nil, nil, false
	})
	t.Cleanup(func() { close(holdFetch) })
	// The group forgets A; A does not notice. (It may have already: the
	// broker sees no heartbeat of A's, and its session is 1 s.)
	if _, err := kafkatest.RemoveDeadMembers(context.Background(), k.Brokers, group); err != nil {
		t.Fatalf("remove A from the group: %v", err)
	}

	runConsumer(t, s, consumerConfig(t, k, group)) // B
	testnet.WaitFor(t, "B to read the partition again from 3 and commit 5", 30*time.Second, func() bool { return committed() == 5 })
	produce(3)
	testnet.WaitFor(t, "B's commit of 8", 20*time.Second, func() bool { return committed() == 8 })

	// A's rejoin takes a while (as on a loaded broker), so A's next owed
	// commit is retried while it is under way.
	k.ControlKey(int16(kmsg.SyncGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		k.SleepControl(func() { time.Sleep(500 * time.Millisecond) })
		return nil, nil, false
	})
	aCommits.letThrough() // A's next (owed) commit reaches the broker
	until := time.Now().Add(4 * time.Second)
	for time.Now().Before(until) {
		if c := committed(); c != 8 {
			t.Fatalf("the group's committed offset went from B's 8 to %d after A, removed from the group, committed what it owed", c)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, passed := aCommits.counts(); passed == 0 {
		t.Fatal("A's owed commit never reached the broker after its commits were let through: the test did not exercise the rejoin")
	}
}

// TestRollingUpgradeFromCooperative: a member of the release before this
// one offered only the cooperative-sticky balancer. During a rolling
// upgrade, old and new members must still share a protocol (none would
// mean the broker refuses the new members' joins); once the old members
// are gone, the group runs the eager sticky protocol.
func TestRollingUpgradeFromCooperative(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	s := settletest.NewStore(t, settle.Config{})
	const group = "upgrade"
	oldCfg := consumerConfig(t, k, group)
	oldCfg.ClientOpts = []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())} // the old release
	old, stopOld := runConsumer(t, s, oldCfg)
	testnet.WaitFor(t, "the old member to join", 20*time.Second, old.Ready)
	groupProtocol := func() (string, int) {
		p, n, err := kafkatest.GroupProtocol(context.Background(), k.Brokers, group)
		if err != nil {
			t.Errorf("describe group %s: %v", group, err)
		}
		return p, n
	}

	cur, stopCur := runConsumer(t, s, consumerConfig(t, k, group))
	defer stopCur()
	testnet.WaitFor(t, "both members in the group, on the protocol both offer", 20*time.Second, func() bool {
		p, n := groupProtocol()
		return n == 2 && p == "cooperative-sticky" && old.Ready() && cur.Ready()
	})
	k.Produce(t, rec(0, usage("record_id", "u-0")), rec(1, usage("record_id", "u-1")))
	testnet.WaitFor(t, "both records settled", 20*time.Second, func() bool {
		_, pg := checkOffsets(t, k, s, group)
		return pg[0] == 1 && pg[1] == 1
	})

	stopOld()
	testnet.WaitFor(t, "the group to run sticky (eager) with the new member alone", 20*time.Second, func() bool {
		p, n := groupProtocol()
		return n == 1 && p == "sticky" && cur.Ready()
	})
	k.Produce(t, rec(0, usage("record_id", "u-2")), rec(1, usage("record_id", "u-3")))
	testnet.WaitFor(t, "the new member to settle both partitions", 20*time.Second, func() bool {
		kafka, _ := checkOffsets(t, k, s, group)
		return kafka[0] == 2 && kafka[1] == 2
	})
}

// offsetsDown is a store whose consumer offsets cannot be read the first
// failures times (the database away while the group assigns partitions).
type offsetsDown struct {
	*settle.Store
	failures atomic.Int32
}

func (s *offsetsDown) ConsumerOffsets(ctx context.Context, group string) (map[string]map[int32]int64, error) {
	if s.failures.Add(-1) >= 0 {
		return nil, dberr.Wrap("read consumer offsets", &pgconn.PgError{Code: "57P03"}) // the database system is starting up
	}
	return s.Store.ConsumerOffsets(ctx, group)
}

// TestReadyAfterOffsetsReadAgain: an outage met while reading the consumer
// offsets at assignment ends when they are read: with no record to settle
// the consumer turns ready again (it stayed "database unavailable" until a
// record came).
func TestReadyAfterOffsetsReadAgain(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	s := &offsetsDown{Store: settletest.NewStore(t, settle.Config{})}
	s.failures.Store(2)
	c, err := consumer.New(s, consumerConfig(t, k, "offsets-down"))
	if err != nil {
		t.Fatal(err)
	}
	stop := testnet.Background(t, c.Run)
	defer stop()
	testnet.WaitFor(t, "the consumer ready with no record to settle", 20*time.Second, c.Ready)
	if s.failures.Load() >= 0 {
		t.Fatal("the offsets were never refused")
	}
}
