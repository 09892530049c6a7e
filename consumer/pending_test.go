package consumer

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/backoff"
)

// TestOwedCommitsBelongToTheirMembership: commits owed under one group
// membership are handed out with it, and dropped when a poll is made under
// another (a member the group dropped that rejoined as a new member).
func TestOwedCommitsBelongToTheirMembership(t *testing.T) {
	s := newCommitState(backoff.New(Config{BackoffMin: time.Millisecond, BackoffMax: time.Millisecond}.retryPolicy()))
	if n := s.session("m1"); n != 0 {
		t.Fatalf("first session dropped %d", n)
	}
	s.assigned(map[string][]int32{"usage": {0, 1}})
	offsets := map[string]map[int32]kgo.EpochOffset{"usage": {0: {Offset: 5}, 1: {Offset: 7}}}
	s.committed(offsets, allFailed(offsets))

	owed, member := s.take(time.Now(), true)
	if len(owed["usage"]) != 2 || member != "m1" {
		t.Fatalf("take: %v under %q, want both partitions under m1", owed, member)
	}
	if n := s.session("m1"); n != 0 {
		t.Fatalf("the same membership dropped %d owed commits", n)
	}
	if n := s.session("m2"); n != 2 {
		t.Fatalf("a new membership dropped %d owed commits, want 2", n)
	}
	if owed, _ := s.take(time.Now(), true); owed != nil {
		t.Fatalf("owed after the membership changed: %v", owed)
	}
}
