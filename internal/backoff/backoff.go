// Package backoff is the capped exponential backoff of every retry loop in
// settle (the consumer, the outbox relay, the webhook sender, the settle
// core's contention retries): the interval doubles from Min with each
// attempt up to Max, and each wait is spread around its interval by jitter
// so that instances that failed together do not retry together.
//
// It owns only the arithmetic and the wait. What is retried, how many
// times, and what a failure means stay with the caller; it must never
// decide to give up on its own.
package backoff

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Jitter is how far a wait may stray from its interval d, as fractions of
// d: the wait is drawn uniformly from [d - Below*d, d + Above*d]. The zero
// Jitter waits exactly d. With Above > 0 a wait may exceed Policy.Max.
type Jitter struct {
	// Below is in [0, 1]: 0.5 waits at least half the interval.
	Below float64
	// Above is >= 0: 0.1 waits at most a tenth more than the interval.
	Above float64
}

// Policy says how long to wait before each retry. A Policy is a value:
// it holds no state and is safe for concurrent use.
type Policy struct {
	// Min is the interval before the first retry; it doubles per attempt.
	// Max caps the interval. Both > 0, Min <= Max.
	Min, Max time.Duration
	// Jitter spreads each wait around its interval.
	Jitter Jitter
}

// Validate reports a policy that cannot produce sensible waits.
func (p Policy) Validate() error {
	switch {
	case p.Min <= 0 || p.Max <= 0:
		return fmt.Errorf("backoff %s..%s: min and max must be positive", p.Min, p.Max)
	case p.Min > p.Max:
		return fmt.Errorf("backoff %s..%s: min must not be above max", p.Min, p.Max)
	case p.Jitter.Below < 0 || p.Jitter.Below > 1 || p.Jitter.Above < 0:
		return errors.New("backoff: jitter below must be in [0, 1] and above must not be negative")
	}
	return nil
}

// Interval is the interval before the attempt-th retry (attempt >= 1;
// less counts as 1), before jitter: Min * 2^(attempt-1), at most Max.
func (p Policy) Interval(attempt int) time.Duration {
	d := p.Min
	for i := 1; i < attempt && d < p.Max; i++ {
		if d > p.Max/2 {
			d = p.Max // and no overflow for a Max near the largest Duration
			break
		}
		d *= 2
	}
	return min(d, p.Max)
}

// Delay is the wait before the attempt-th retry: Interval(attempt) spread
// by Jitter. Callers that count attempts themselves (the webhook sender
// keeps the count in its delivery row) use it directly.
func (p Policy) Delay(attempt int) time.Duration {
	d := p.Interval(attempt)
	if p.Jitter == (Jitter{}) || d <= 0 {
		return d
	}
	lo := d - time.Duration(float64(d)*p.Jitter.Below)
	hi := d + time.Duration(float64(d)*p.Jitter.Above)
	return lo + rand.N(hi-lo+1)
}

// Backoff counts the attempts of one retry loop. It is not safe for
// concurrent use: each loop (or the lock that guards it) owns its own.
type Backoff struct {
	p       Policy
	attempt int
}

// New returns a Backoff whose first wait is p.Delay(1).
func New(p Policy) *Backoff { return &Backoff{p: p} }

// Next returns the next wait and counts the attempt: the interval doubles
// for the wait after it, up to Max.
func (b *Backoff) Next() time.Duration {
	if b.attempt < 1<<20 { // past Max long before this; the bound keeps the count finite
		b.attempt++
	}
	return b.p.Delay(b.attempt)
}

// Reset starts the doubling again from Min, after a success.
func (b *Backoff) Reset() { b.attempt = 0 }

// Wait sleeps for the next wait, or until ctx is done or abandon is closed
// (nil: never), and reports whether it slept the whole wait.
func (b *Backoff) Wait(ctx context.Context, abandon <-chan struct{}) bool {
	return Sleep(ctx, b.Next(), abandon)
}

// Sleep waits d, or until ctx is done or abandon is closed (nil: never),
// and reports whether it waited the whole of d.
func Sleep(ctx context.Context, d time.Duration, abandon <-chan struct{}) bool {
	t := time.NewTimer(d)
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
