package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/settlehq/settle/internal/backoff"
	"github.com/settlehq/settle/internal/crashpoint"
	"github.com/settlehq/settle/outlet"
	"github.com/settlehq/settle/settle/message"
)

// Consumer is one member of the consumer group. Create it with New and run
// it with Run; Ready and Counts may be called from any goroutine.
type Consumer struct {
	store Store
	cfg   Config
	log   *slog.Logger

	joined      atomic.Bool // the member holds an assignment (possibly empty)
	dbDown      atomic.Bool // the last settle attempt found the database unavailable
	brokerDown  atomic.Bool // the last publish attempt failed
	running     atomic.Bool
	out         *outlet.Outlet // the results' way out, on the client of the running member (Run)
	commitsLost atomic.Int64   // commits whose outcome is unknown

	// commits tracks the owned partitions and the commits owed to Kafka
	// after a failed one (retried while idle).
	commits *commitState

	// abandonMu guards abandon: the channel of the current poll, closed
	// when the group wants to rebalance or the consumer stops while this
	// member holds a poll.
	abandonMu sync.Mutex
	abandon   chan struct{}

	// health is what the fetches said lately: batches skipped,
	// partitions failing (skip.go).
	health fetchHealth

	countsMu sync.Mutex
	counts   map[message.Outcome]int64
}

// New returns a consumer over store. It does not connect: Run does.
func New(store Store, cfg Config) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return &Consumer{store: store, cfg: cfg, log: cfg.Logger.With("component", "consumer", "group", cfg.Group),
		counts: map[message.Outcome]int64{}, commits: newCommitState(backoff.New(cfg.retryPolicy()))}, nil
}

// Ready reports whether the consumer is making progress: running, joined to
// its group, neither the database nor the broker is known to be down, and
// no partition failing its fetches.
func (c *Consumer) Ready() bool {
	return c.NotReadyReason() == ""
}

// NotReadyReason says why Ready is false ("" when it is true).
func (c *Consumer) NotReadyReason() string {
	switch {
	case !c.running.Load():
		return "consumer not running"
	case !c.joined.Load():
		return "not joined to group " + c.cfg.Group
	case c.dbDown.Load():
		return "database unavailable: paused, retrying with backoff"
	case c.brokerDown.Load():
		return "broker unavailable: paused, retrying with backoff"
	}
	return c.health.notReadable(time.Now())
}

// Counts returns how many input records this consumer has handled, by
// outcome (redeliveries included).
func (c *Consumer) Counts() map[message.Outcome]int64 {
	c.countsMu.Lock()
	defer c.countsMu.Unlock()
	out := make(map[message.Outcome]int64, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// Run joins the group and settles records until ctx is done, then stops
// gracefully: it stops fetching, finishes the batch it holds (for at most
// DrainTimeout), commits what was settled, and leaves the group. It returns
// nil after a requested stop, or the error that prevented it from running.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("consumer: Run called twice: create one Consumer per running member")
	}
	defer c.running.Store(false)

	cl, err := kgo.NewClient(append(c.clientOpts(), c.cfg.ClientOpts...)...)
	if err != nil {
		return fmt.Errorf("consumer: create kafka client: %w", err)
	}
	c.out = c.newOutlet(cl)
	workCtx, stopWork := c.drainContext(ctx)
	defer stopWork()
	// A stop, like a rebalance, ends the poll after the batch in hand.
	defer context.AfterFunc(ctx, c.abandonPoll)()

	c.log.Info("consumer started", "topic", c.cfg.Topic, "brokers", c.cfg.Brokers)
	for c.poll(ctx, workCtx, cl) {
	}
	c.stop(ctx, workCtx, cl)
	return nil
}

// clientOpts are the Kafka client's options; Config.ClientOpts come after
// them and can override them.
func (c *Consumer) clientOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(c.cfg.Brokers...),
		kgo.ConsumerGroup(c.cfg.Group),
		kgo.ConsumeTopics(c.cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Offsets are committed by hand, after the transaction that covers
		// them; autocommit would commit records that are not settled yet.
		kgo.DisableAutoCommit(),
		// A rebalance waits until the records of a poll are settled and
		// committed, so a batch is never split from its commit and a
		// revoked partition is never committed by its old owner.
		kgo.BlockRebalanceOnPoll(),
		// Eager, not cooperative: a member revokes everything it holds
		// before it rejoins, so it never carries a partition (and its
		// fetch position) from one membership into the next. A member the
		// group dropped while it stalled learns it from a refused commit,
		// and franz-go then rejoins it as a new member; cooperatively, it
		// would keep its old partitions' positions and owed commits until
		// the new assignment is synced, and a commit sent meanwhile goes
		// out under the new membership (TestZombieCommitFenced). Sticky:
		// partitions stay where they were when they can. Cooperative-sticky
		// is offered second, for a rolling upgrade from a release that
		// offered only it: while such members remain it is the one
		// protocol all support, and the group runs it; once they are gone
		// every member prefers sticky, and the group turns eager
		// (TestRollingUpgradeFromCooperative).
		kgo.Balancers(kgo.StickyBalancer(), kgo.CooperativeStickyBalancer()),
		kgo.OnPartitionsCallbackBlocked(c.onBlocked),
		// The callbacks run while no poll is held (BlockRebalanceOnPoll), so
		// the owned set is fixed between PollRecords and AllowRebalance.
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.commits.assigned(m)
			c.joined.Store(true)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			c.commits.revoked(m)
			c.joined.Store(false)
		}),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) {
			c.commits.lost()
			c.joined.Store(false)
		}),
		kgo.AdjustFetchOffsetsFn(c.adjustOffsets),
		kgo.SessionTimeout(c.cfg.SessionTimeout),
		kgo.RebalanceTimeout(c.cfg.RebalanceTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, c.cfg.SessionTimeout/3)),
		// A fetch waits up to fetchLinger for fetchMinBytes: a stream at a
		// moderate rate then comes in polls of a few hundred records, not
		// in a trickle of small ones that each pay a transaction's fixed
		// cost (BENCHMARKS.md). A backlog fills it at once. ClientOpts can
		// set other values.
		kgo.FetchMaxWait(fetchLinger),
		// A batch decompresses into one allocation: it is capped, and one
		// past the cap is skipped (skip.go). The client's own option does
		// not bound a decompressor of one's own: both are set.
		kgo.WithDecompressor(newBoundedDecompressor(c.cfg.DecompressBatchBytesMax)),
		kgo.MaxDecompressBatchBytes(c.cfg.DecompressBatchBytesMax),
		kgo.FetchMinBytes(fetchMinBytes),
		// Results: idempotent producer, every in-sync replica.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
	}
}

// drainContext returns the context work on a poll runs under and its stop
// function: it outlives ctx by at most DrainTimeout, so a stop lets the
// batch in hand finish and commit rather than throw the work away.
func (c *Consumer) drainContext(ctx context.Context) (context.Context, func()) {
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	stopDrain := context.AfterFunc(ctx, func() {
		t := time.NewTimer(c.cfg.DrainTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancelWork()
		case <-workCtx.Done():
		}
	})
	return workCtx, func() {
		stopDrain()
		cancelWork()
	}
}

// poll runs one turn of the loop: PollRecords, settle and commit what it
// returned, AllowRebalance. It reports false once ctx is done or the client
// closed, with the last poll still held.
func (c *Consumer) poll(ctx, workCtx context.Context, cl *kgo.Client) bool {
	// PollRecords blocks until records arrive; while a failed commit
	// is owed, it is bounded so the loop wakes up to retry it even if
	// the partition stays idle. A poll that ends on its deadline holds
	// the rebalance gate like any other: the retry is inside ownership.
	// The poll's abandon channel exists before the poll does: the
	// client holds rebalances from inside PollRecords on, and a
	// rebalance that blocks then must still find it to close.
	abandon := c.newPollAbandon()
	pollCtx, cancelPoll := ctx, context.CancelFunc(func() {})
	if d, owed := c.commits.next(time.Now()); owed {
		pollCtx, cancelPoll = context.WithTimeout(ctx, max(d, time.Millisecond))
	}
	fetches := cl.PollRecords(pollCtx, c.cfg.PollRecordsMax)
	cancelPoll()
	if fetches.IsClientClosed() || ctx.Err() != nil {
		return false
	}
	tooLarge := c.fetchErrors(fetches)
	// The membership the poll's records were fetched under: it
	// cannot change until AllowRebalance (an eager member revokes,
	// or is told it lost, everything before it rejoins).
	member, _ := cl.GroupMetadata()
	if n := c.commits.session(member); n > 0 {
		c.log.Warn("dropped offset commits owed by an earlier membership of the group: its partitions were given to other members",
			"partitions", n, "member", member)
	}
	c.handlePoll(workCtx, abandon, cl, member, fetches)
	for _, e := range tooLarge {
		c.skipBatch(workCtx, abandon, cl, member, e)
	}
	c.retryCommits(workCtx, cl, false, 10*time.Second)
	cl.AllowRebalance()
	return true
}

// stop ends Run from inside its last poll: owed commits get a last try, and
// the member leaves the group.
func (c *Consumer) stop(ctx, workCtx context.Context, cl *kgo.Client) {
	// Still inside the last poll: a commit owed after a failure gets one
	// last, short attempt, so a stop does not leave phantom lag behind.
	c.retryCommits(workCtx, cl, true, 2*time.Second)
	// Leave the group within a bound so a dead broker cannot hang the
	// stop; Close after a failed leave still releases the connections, and
	// the group notices the member is gone at its session timeout.
	cl.AllowRebalance()
	leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := cl.LeaveGroupContext(leaveCtx); err != nil {
		c.log.Warn("leave group failed; the group will notice at its session timeout", "err", err)
	}
	cl.Close()
	c.joined.Store(false)
	c.log.Info("consumer stopped")
}

// The fetch linger: at most 40 ms of added latency, for batches large
// enough to settle at close to the full rate's cost per record.
const (
	fetchLinger   = 40 * time.Millisecond
	fetchMinBytes = 256 << 10
)

// onBlocked runs (in its own goroutine) when a rebalance waits for this
// member's poll.
func (c *Consumer) onBlocked(context.Context, *kgo.Client) { c.abandonPoll() }

// abandonPoll closes the current poll's abandon channel: work that is only
// waiting out an outage gives up, and every partition stops after the batch
// in hand (errYielded), so a member holds neither the group's rebalance nor
// its own stop for a whole poll.
func (c *Consumer) abandonPoll() {
	c.abandonMu.Lock()
	defer c.abandonMu.Unlock()
	if c.abandon != nil && !closed(c.abandon) {
		close(c.abandon)
	}
}

// newPollAbandon installs and returns a fresh abandon channel for one poll.
func (c *Consumer) newPollAbandon() <-chan struct{} {
	c.abandonMu.Lock()
	defer c.abandonMu.Unlock()
	c.abandon = make(chan struct{})
	return c.abandon
}

// partitionWork is one partition's share of a poll and how far it got.
type partitionWork struct {
	topic     string
	partition int32
	records   []*kgo.Record
	next      int64 // offset after the last record settled and published; -1: none
	epoch     int32 // leader epoch of that record
	err       error
}

// handlePoll settles one poll: its lanes concurrently (each in its own
// goroutine, ended before handlePoll returns), each partition's records in
// order. Then it commits what was settled and rewinds what was not.
func (c *Consumer) handlePoll(ctx context.Context, abandon <-chan struct{}, cl *kgo.Client, member string, fetches kgo.Fetches) {
	var work []*partitionWork
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) > 0 {
			work = append(work, &partitionWork{topic: p.Topic, partition: p.Partition, records: p.Records, next: -1})
		}
	})
	if len(work) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, l := range lanes(work, c.store.Config().BatchRecordsMax, c.cfg.LanesMax) {
		wg.Go(func() { c.handleLane(ctx, abandon, cl, l) })
	}
	wg.Wait()

	commit := map[string]map[int32]kgo.EpochOffset{}
	rewind := map[string]map[int32]kgo.EpochOffset{}
	for _, w := range work {
		if w.next >= 0 {
			if commit[w.topic] == nil {
				commit[w.topic] = map[int32]kgo.EpochOffset{}
			}
			commit[w.topic][w.partition] = kgo.EpochOffset{Epoch: w.epoch, Offset: w.next}
		}
		if w.err != nil {
			// The client's position is already past every polled record;
			// put it back on the first record not done, so the next poll
			// (ours, if we keep the partition) starts there.
			from := w.records[0].Offset
			if w.next >= 0 {
				from = w.next
			}
			if rewind[w.topic] == nil {
				rewind[w.topic] = map[int32]kgo.EpochOffset{}
			}
			rewind[w.topic][w.partition] = kgo.EpochOffset{Epoch: -1, Offset: from}
			level := slog.LevelWarn
			if errors.Is(w.err, errYielded) {
				level = slog.LevelInfo
			}
			c.log.Log(ctx, level, "partition batch not finished; it will be read again", "topic", w.topic, "partition", w.partition, "from", from, "err", w.err)
		}
	}
	crashpoint.Hit("after_commit_before_offset_commit")
	if len(commit) > 0 {
		c.commits.committed(commit, c.commit(ctx, cl, commit, member, 10*time.Second))
	}
	if len(rewind) > 0 {
		cl.SetOffsets(rewind)
	}
}

// commit commits offsets already covered by committed transactions, within
// timeout, and returns the partitions whose commit failed. A failed commit
// is "unknown", not "nothing committed": the broker may have applied it.
// Either answer is safe, because the offsets are already in PostgreSQL and a
// redelivered record repeats its stored result; the caller owes the
// partition a retry (commitState) until a later commit supersedes it. It
// must run inside a poll (between PollRecords and AllowRebalance), and it is
// only sent under member, the membership the poll was made under: the
// client sends a commit under whatever membership it has when the commit
// goes out, which after a rejoin is not the one that owned the partitions.
func (c *Consumer) commit(ctx context.Context, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset, member string, timeout time.Duration) (failed map[string]map[int32]bool) {
	if len(offsets) == 0 {
		return nil
	}
	// A stopping consumer still commits what it settled.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	cctx = kgo.PreCommitFnContext(cctx, func(req *kmsg.OffsetCommitRequest) error {
		if req.MemberID != member {
			return fmt.Errorf("not sent: the group membership changed from %q to %q since the records were polled", member, req.MemberID)
		}
		return nil
	})
	// Every partition failed until the response says otherwise: one that
	// is missing from the response has an unknown outcome too.
	failed = allFailed(offsets)
	var failure error
	cl.CommitOffsetsSync(cctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			failure = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					failure = err
					continue
				}
				delete(failed[t.Topic], p.Partition)
				if len(failed[t.Topic]) == 0 {
					delete(failed, t.Topic)
				}
			}
		}
		if failure == nil && len(failed) > 0 {
			failure = errors.New("the response does not name every partition committed")
		}
	})
	if failure != nil {
		c.commitsLost.Add(1)
		c.log.Warn("offset commit failed; its outcome is unknown: it is retried with backoff while the partition is owned and idle, or superseded by the next commit",
			"err", failure, "offsets", offsets)
	}
	return failed
}

func (c *Consumer) count(rs []message.Result) {
	c.countsMu.Lock()
	for i := range rs {
		c.counts[rs[i].Outcome]++
	}
	c.countsMu.Unlock()
	if m := c.cfg.Metrics; m != nil {
		// Counted per (outcome, kind, reason) for the batch, not per record.
		type key struct{ outcome, kind, reason string }
		n := map[key]int64{}
		ctx := context.Background()
		for i := range rs {
			k := key{outcome: string(rs[i].Outcome), reason: rs[i].Reason}
			if rs[i].Identity != nil {
				k.kind = rs[i].Identity.Operation
			}
			n[k]++
			m.EndToEnd(ctx, rs[i].Timestamp)
		}
		for k, v := range n {
			m.Record(ctx, k.outcome, k.kind, k.reason, v)
		}
	}
}
