package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/edge/webhook/deliveries"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/retention"
	"github.com/settlehq/settle/settle/settletest"
)

// TestRunSettlesAndStops: Run, as a library call with a Config and no
// flags, serves /readyz, settles a record from the usage topic, relays its
// settlement, and returns nil once its context ends, having released the
// admin port.
func TestRunSettlesAndStops(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	store := settletest.NewStore(t, settle.Config{})
	// A service ran with a webhook URL before: this one, without, says that
	// its settlements are queued for a sender it is not.
	if err := deliveries.New(store).Subscribe(context.Background(), "settlements"); err != nil {
		t.Fatal(err)
	}
	var logs testnet.SyncBuffer
	s, err := New(Config{Store: store, Brokers: k.Brokers, AdminAddr: "127.0.0.1:0",
		Consumer:        consumer.Config{SessionTimeout: time.Second},
		ShutdownTimeout: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	admin := s.AdminAddr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	testnet.WaitFor(t, "/readyz 200", 20*time.Second, func() bool { c, _ := testnet.HTTPGet("http://" + admin + "/readyz"); return c == 200 })
	k.Produce(t, &kgo.Record{Topic: "usage", Key: []byte("acme/cust-1"), Value: []byte(`{"tenant_id":"acme","account_period":"2026-11",` +
		`"record_id":"g-1","kind":"grant","subject":"cust-1","amount":"100","currency":"USD","occurred_at":"2026-11-02T10:00:00Z"}`)})
	if got := k.Read(t, "settlements", 1, 20*time.Second); len(got) != 1 {
		t.Fatalf("settlements topic: %d records, want 1", len(got))
	}
	// The consumer counts a batch once its results are acknowledged, which
	// may be after the relay published the settlement (it takes its own
	// process's settlements from memory, woken by the commit).
	testnet.WaitFor(t, "1 settled counted", 20*time.Second, func() bool { return s.Counts()[message.OutcomeSettled] >= 1 })
	if c := s.Counts(); len(c) != 1 || c[message.OutcomeSettled] != 1 {
		t.Errorf("counts: %v, want 1 settled", c)
	}
	if !strings.Contains(logs.String(), "settlements are queued for webhook delivery, but this service sends none") {
		t.Errorf("no warning of the webhook deliveries nobody sends:\n%s", logs.String())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after its context ended: %v, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within the shutdown timeout")
	}
	ln, err := net.Listen("tcp", admin)
	if err != nil {
		t.Fatalf("admin port still bound after Run: %v", err)
	}
	ln.Close()
}

// TestNewRefuses: settings that cannot work are a *ConfigError saying what
// to fix, and a refused admin listener leaves nothing bound.
func TestNewRefuses(t *testing.T) {
	t.Parallel()
	if err := (Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "Config.Store") {
		t.Errorf("zero Config: %v, want the missing store named", err)
	}
	store := settletest.NewStore(t, settle.Config{})
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no brokers", Config{Store: store}, "no brokers"},
		{"negative shutdown timeout", Config{Store: store, Brokers: []string{"127.0.0.1:1"}, ShutdownTimeout: -time.Second}, "shutdown timeout"},
		{"admin beyond loopback without a token", Config{Store: store, Brokers: []string{"127.0.0.1:1"}, AdminAddr: "0.0.0.0:0"}, "beyond loopback"},
	} {
		s, err := New(tc.cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a *ConfigError about %q", tc.name, err, tc.want)
		}
		if s != nil {
			t.Errorf("%s: a service was returned with the error", tc.name)
		}
	}
	// Closed without running, a service releases its port.
	s, err := New(Config{Store: store, Brokers: []string{"127.0.0.1:1"}, AdminAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	addr := s.AdminAddr().String()
	s.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("admin port still bound after Close: %v", err)
	}
	ln.Close()
}

// fakeSweepStore counts the sweeper's calls; WakeWaiting fails once.
type fakeSweepStore struct {
	mu                    sync.Mutex
	expire, wake, orphans int
	holdsLeft             int // ExpireHolds returns 1 while some are left
	orphanAfter           time.Duration
	secondRound           chan struct{}
	prunes                []retention.Options
}

func (f *fakeSweepStore) ExpireHolds(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expire++
	if f.holdsLeft > 0 {
		f.holdsLeft--
		return 1, nil
	}
	return 0, nil
}

func (f *fakeSweepStore) WakeWaiting(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wake++
	if f.wake == 1 {
		return 0, errors.New("database unavailable")
	}
	return 0, nil
}

func (f *fakeSweepStore) SweepOrphans(_ context.Context, after time.Duration) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.orphans++
	f.orphanAfter = after
	if f.orphans == 2 {
		close(f.secondRound)
	}
	return 0, nil
}

func (f *fakeSweepStore) Prune(_ context.Context, opts retention.Options) ([]retention.Count, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prunes = append(f.prunes, opts)
	return []retention.Count{{Table: "deliveries", Rows: 1}}, nil
}

// TestSweeperPrunes: with a prune interval the sweeper prunes once that
// interval has passed (not at start), with the dead-letter limit and the
// canary's retention as cut-offs in the past; without one it never prunes.
func TestSweeperPrunes(t *testing.T) {
	t.Parallel()
	for _, every := range []time.Duration{0, 30 * time.Millisecond} {
		f := &fakeSweepStore{secondRound: make(chan struct{})}
		sw := &sweeper{store: f, pruner: f, orphanAfter: time.Hour, interval: 5 * time.Millisecond, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			pruneEvery: every, pruneDeadLettersAfter: time.Hour, pruneCanaryKeep: 48 * time.Hour}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		start := time.Now()
		go func() { defer close(done); sw.run(ctx) }()
		time.Sleep(200 * time.Millisecond)
		cancel()
		<-done
		f.mu.Lock()
		prunes := f.prunes
		f.mu.Unlock()
		if every == 0 {
			if len(prunes) != 0 {
				t.Errorf("no prune interval: pruned %d times", len(prunes))
			}
			continue
		}
		if len(prunes) < 2 || len(prunes) > 7 {
			t.Fatalf("prune every %s for 200ms: pruned %d times, want about 6", every, len(prunes))
		}
		if cut := prunes[0].DeadLettersBefore; cut.After(time.Now().Add(-time.Hour)) || cut.Before(start.Add(-time.Hour)) || prunes[0].DryRun {
			t.Errorf("first prune: %+v, want dead letters before about an hour ago, not a dry run", prunes[0])
		}
		if cut := prunes[0].CanaryBefore; cut.After(time.Now().Add(-48*time.Hour)) || cut.Before(start.Add(-48*time.Hour)) {
			t.Errorf("first prune: %+v, want the canary's history before about 48 hours ago", prunes[0])
		}
	}
}

// TestSweeperDrainsAndRetries: each round drains a job until it finds
// nothing, a failed job does not stop the others, and it runs again the
// next round.
func TestSweeperDrainsAndRetries(t *testing.T) {
	t.Parallel()
	f := &fakeSweepStore{holdsLeft: 3, secondRound: make(chan struct{})}
	sw := &sweeper{store: f, orphanAfter: time.Hour, interval: 5 * time.Millisecond, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sw.run(ctx) }()
	select {
	case <-f.secondRound:
	case <-time.After(10 * time.Second):
		t.Fatal("no second sweep round")
	}
	cancel()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.expire < 5 { // 3 found, 1 empty; then at least 1 in round two
		t.Errorf("hold expiry called %d times, want the 3 holds drained in round one and again in round two", f.expire)
	}
	if f.wake < 2 || f.orphanAfter != time.Hour {
		t.Errorf("waiting operations swept %d times, orphans after %s: want a retry after the failure and 1h", f.wake, f.orphanAfter)
	}
}
