package consumer

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/backoff"
)

// commitState is what this member owns and which offset commits it still
// owes Kafka.
//
// A commit that fails is "unknown", not lost, and the next commit of the
// partition supersedes it; but a commit that fails on the last batch of a
// backlog has no next commit while the partition stays idle, and Kafka's
// offset (which lag tooling and autoscalers read) would stay behind
// PostgreSQL's. So the newest offset whose commit failed is kept per
// partition and committed again with backoff while idle — only while the
// member still owns the partition: a revoked or lost partition drops it,
// because committing a partition that moved to another member could move
// the group's offset backwards.
//
// The group callbacks (assigned, revoked, lost) run while no poll is held
// (BlockRebalanceOnPoll), so between PollRecords and AllowRebalance the
// owned set cannot change under a commit. Owed commits also belong to the
// group membership they were earned under: a member the group dropped may
// rejoin as a new member without being told it lost anything (franz-go
// rejoins from a refused commit), and a commit owed from before must not go
// out under the new membership (see session and Consumer.commit).
type commitState struct {
	mu      sync.Mutex
	member  string // the group membership the owed commits were earned under
	owned   map[string]map[int32]bool
	pending map[string]map[int32]kgo.EpochOffset
	backoff *backoff.Backoff
	due     time.Time // next retry of pending; meaningless when pending is empty
}

func newCommitState(b *backoff.Backoff) *commitState {
	return &commitState{owned: map[string]map[int32]bool{}, pending: map[string]map[int32]kgo.EpochOffset{}, backoff: b}
}

// session records the group membership of a poll and returns how many owed
// commits it dropped because they were earned under another one (a member
// the group dropped and that rejoined as a new member): their partitions
// were given to others, who may have committed further.
func (s *commitState) session(member string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if member == s.member {
		return 0
	}
	s.member = member
	n := 0
	for _, ps := range s.pending {
		n += len(ps)
	}
	clear(s.pending)
	return n
}

// assigned records partitions given to this member.
func (s *commitState) assigned(m map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range m {
		if s.owned[t] == nil {
			s.owned[t] = map[int32]bool{}
		}
		for _, p := range ps {
			s.owned[t][p] = true
		}
	}
}

// revoked forgets partitions taken from this member, and the commits it
// owed for them: the next owner starts from Kafka's committed offset and
// commits its own.
func (s *commitState) revoked(m map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			delete(s.owned[t], p)
			delete(s.pending[t], p)
		}
		if len(s.owned[t]) == 0 {
			delete(s.owned, t)
		}
		if len(s.pending[t]) == 0 {
			delete(s.pending, t)
		}
	}
}

// lost forgets the whole assignment and every owed commit: the member is no
// longer in the group (its session ended), whatever partitions it was told.
func (s *commitState) lost() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.owned)
	clear(s.pending)
}

// committed records the outcome of a commit of offsets: a partition in
// failed is owed again (its newest offset), a partition committed drops an
// owed commit it supersedes.
func (s *commitState) committed(offsets map[string]map[int32]kgo.EpochOffset, failed map[string]map[int32]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	hadPending := len(s.pending) > 0
	anyFailed := false
	for t, ps := range offsets {
		for p, o := range ps {
			if failed[t][p] {
				if !s.owned[t][p] {
					continue // not ours (cannot happen inside a poll): never retried
				}
				if s.pending[t] == nil {
					s.pending[t] = map[int32]kgo.EpochOffset{}
				}
				if old, ok := s.pending[t][p]; !ok || old.Offset <= o.Offset {
					s.pending[t][p] = o
				}
				anyFailed = true
				continue
			}
			if old, ok := s.pending[t][p]; ok && old.Offset <= o.Offset {
				delete(s.pending[t], p)
				if len(s.pending[t]) == 0 {
					delete(s.pending, t)
				}
			}
		}
	}
	switch {
	case len(s.pending) == 0:
		s.backoff.Reset()
	case anyFailed || !hadPending:
		s.due = now.Add(s.backoff.Next())
	}
}

// next reports how long until owed commits are due (<= 0: now), and
// whether any are owed.
func (s *commitState) next(now time.Time) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return 0, false
	}
	return s.due.Sub(now), true
}

// take returns the owed commits of owned partitions if they are due (or
// force), nil otherwise, and the membership they were earned under.
func (s *commitState) take(now time.Time, force bool) (map[string]map[int32]kgo.EpochOffset, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 || (!force && now.Before(s.due)) {
		return nil, ""
	}
	out := map[string]map[int32]kgo.EpochOffset{}
	for t, ps := range s.pending {
		for p, o := range ps {
			if !s.owned[t][p] {
				continue
			}
			if out[t] == nil {
				out[t] = map[int32]kgo.EpochOffset{}
			}
			out[t][p] = o
		}
	}
	return out, s.member
}

// drop forgets an owed commit (a partition whose owed offset PostgreSQL no
// longer covers).
func (s *commitState) drop(t string, p int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending[t], p)
	if len(s.pending[t]) == 0 {
		delete(s.pending, t)
	}
}

// retryCommits commits again the owed offsets of the partitions this member
// still owns, when they are due (or force, at a stop). It must run inside a
// poll — between PollRecords and AllowRebalance — like every commit, so no
// partition can be revoked while it commits. An owed offset is committed
// only while PostgreSQL covers it (it always does, unless the database went
// back under a running consumer, e.g. a restore: the partition's next
// assignment reconciles the two, see adjustOffsets).
func (c *Consumer) retryCommits(ctx context.Context, cl *kgo.Client, force bool, timeout time.Duration) {
	owed, member := c.commits.take(time.Now(), force)
	if len(owed) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	pg, err := c.store.ConsumerOffsets(rctx, c.cfg.Group)
	if err != nil {
		c.log.Warn("reading consumer offsets before retrying an offset commit failed; retrying later", "err", err)
		c.commits.committed(owed, allFailed(owed))
		return
	}
	for t, ps := range owed {
		for p, o := range ps {
			if o.Offset > pg[t][p] {
				c.log.Warn("an offset owed to Kafka is ahead of the database's (was the database restored?); not committing it",
					"topic", t, "partition", p, "offset", o.Offset, "database_offset", pg[t][p])
				c.commits.drop(t, p)
				delete(ps, p)
			}
		}
		if len(ps) == 0 {
			delete(owed, t)
		}
	}
	if len(owed) == 0 {
		return
	}
	failed := c.commit(rctx, cl, owed, member, timeout)
	c.commits.committed(owed, failed)
	if len(failed) == 0 {
		c.log.Info("offset commit retried while idle: Kafka caught up", "offsets", owed)
	}
}

func allFailed(offsets map[string]map[int32]kgo.EpochOffset) map[string]map[int32]bool {
	out := map[string]map[int32]bool{}
	for t, ps := range offsets {
		out[t] = map[int32]bool{}
		for p := range ps {
			out[t][p] = true
		}
	}
	return out
}
