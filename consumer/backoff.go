package consumer

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff is capped exponential backoff with jitter. The jitter keeps
// instances that failed together from retrying together.
type backoff struct {
	min, max time.Duration
	next     time.Duration
}

func newBackoff(min, max time.Duration) *backoff {
	return &backoff{min: min, max: max, next: min}
}

// wait sleeps for the next interval, or until ctx is done or abandon is
// closed, and reports whether it slept the whole interval.
func (b *backoff) wait(ctx context.Context, abandon <-chan struct{}) bool {
	t := time.NewTimer(b.delay())
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-abandon:
		return false
	}
}

// delay returns the next interval (jittered) and doubles the one after it,
// up to max.
func (b *backoff) delay() time.Duration {
	d := b.next/2 + rand.N(b.next/2+1)
	b.next = min(b.next*2, b.max)
	return d
}

func (b *backoff) reset() { b.next = b.min }
