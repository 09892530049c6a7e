package backoff

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestIntervalDoublesToTheCap: the interval starts at Min, doubles per
// attempt and stays at Max, also far past it (no overflow).
func TestIntervalDoublesToTheCap(t *testing.T) {
	t.Parallel()
	p := Policy{Min: 100 * time.Millisecond, Max: time.Second}
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{
		{-1, 100 * time.Millisecond}, {0, 100 * time.Millisecond}, {1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond}, {3, 400 * time.Millisecond}, {4, 800 * time.Millisecond},
		{5, time.Second}, {6, time.Second}, {1000, time.Second}, {math.MaxInt, time.Second},
	} {
		if got := p.Interval(tc.attempt); got != tc.want {
			t.Errorf("Interval(%d) = %s, want %s", tc.attempt, got, tc.want)
		}
	}
	huge := Policy{Min: time.Nanosecond, Max: time.Duration(math.MaxInt64)}
	for _, n := range []int{62, 63, 64, 200} {
		if got := huge.Interval(n); got <= 0 || got > huge.Max {
			t.Errorf("Interval(%d) with Max = the largest Duration: %d, want in (0, Max]", n, got)
		}
	}
	if got := huge.Interval(200); got != huge.Max {
		t.Errorf("Interval(200) = %d, want the cap %d", got, huge.Max)
	}
}

// TestJitterRange: every wait stays inside [d - Below*d, d + Above*d] and
// the draws spread over that range (near both ends), for the spreads the
// callers use; no jitter waits the interval exactly.
func TestJitterRange(t *testing.T) {
	t.Parallel()
	const d = 10 * time.Millisecond
	for _, tc := range []struct {
		name   string
		jitter Jitter
		lo, hi time.Duration
	}{
		{"none", Jitter{}, d, d},
		{"below half", Jitter{Below: 0.5}, d / 2, d},
		{"half either side", Jitter{Below: 0.5, Above: 0.5}, d / 2, d + d/2},
		{"a tenth above", Jitter{Above: 0.1}, d, d + d/10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := Policy{Min: d, Max: d, Jitter: tc.jitter}
			least, most := time.Duration(math.MaxInt64), time.Duration(0)
			for range 5000 {
				w := p.Delay(1)
				if w < tc.lo || w > tc.hi {
					t.Fatalf("Delay = %s, outside [%s, %s]", w, tc.lo, tc.hi)
				}
				least, most = min(least, w), max(most, w)
			}
			// Within a twentieth of the range from each end: 5000 uniform
			// draws miss that only with probability 0.95^5000.
			if margin := (tc.hi - tc.lo) / 20; least > tc.lo+margin || most < tc.hi-margin {
				t.Errorf("draws spanned [%s, %s], want near [%s, %s]", least, most, tc.lo, tc.hi)
			}
		})
	}
}

// TestBackoffNextAndReset: Next doubles from Min up to Max, jitter
// included within its bounds, and Reset starts again from Min.
func TestBackoffNextAndReset(t *testing.T) {
	t.Parallel()
	b := New(Policy{Min: 8 * time.Millisecond, Max: 32 * time.Millisecond, Jitter: Jitter{Below: 0.5}})
	for i, want := range []time.Duration{8, 16, 32, 32, 32} {
		want *= time.Millisecond
		if got := b.Next(); got < want/2 || got > want {
			t.Errorf("wait %d = %s, want in [%s, %s]", i+1, got, want/2, want)
		}
	}
	b.Reset()
	if got := b.Next(); got < 4*time.Millisecond || got > 8*time.Millisecond {
		t.Errorf("wait after Reset = %s, want in [4ms, 8ms]", got)
	}
	exact := New(Policy{Min: time.Millisecond, Max: 3 * time.Millisecond})
	for i, want := range []time.Duration{1, 2, 3, 3} {
		if got := exact.Next(); got != want*time.Millisecond {
			t.Errorf("unjittered wait %d = %s, want %s", i+1, got, want*time.Millisecond)
		}
	}
}

// TestWaitEndsEarly: Wait returns false at once when ctx is cancelled or
// abandon is closed, and true after sleeping the whole wait.
func TestWaitEndsEarly(t *testing.T) {
	t.Parallel()
	long := Policy{Min: time.Hour, Max: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if New(long).Wait(ctx, nil) {
		t.Error("Wait with a cancelled context reported a full wait")
	}
	abandon := make(chan struct{})
	close(abandon)
	if New(long).Wait(context.Background(), abandon) {
		t.Error("Wait with a closed abandon channel reported a full wait")
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel2)
	if Sleep(ctx2, time.Hour, make(chan struct{})) {
		t.Error("Sleep reported a full hour after its context was cancelled")
	}
	if !New(Policy{Min: time.Millisecond, Max: time.Millisecond}).Wait(context.Background(), nil) {
		t.Error("Wait of 1ms with nothing cancelled reported an early end")
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p  Policy
		ok bool
	}{
		{Policy{Min: 1, Max: 1}, true},
		{Policy{Min: time.Second, Max: time.Minute, Jitter: Jitter{Below: 1, Above: 2}}, true},
		{Policy{Min: 0, Max: 1}, false},
		{Policy{Min: 1, Max: 0}, false},
		{Policy{Min: 2, Max: 1}, false},
		{Policy{Min: 1, Max: 1, Jitter: Jitter{Below: 1.5}}, false},
		{Policy{Min: 1, Max: 1, Jitter: Jitter{Below: -0.1}}, false},
		{Policy{Min: 1, Max: 1, Jitter: Jitter{Above: -1}}, false},
	} {
		if err := tc.p.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tc.p, err, tc.ok)
		}
	}
}
