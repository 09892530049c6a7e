package canary_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/canary"
	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/service"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/settletest"
)

// rig is the service on a loopback broker and its own database.
type rig struct {
	k     *kafkatest.Cluster
	store *settle.Store
}

func startService(t *testing.T) *rig {
	t.Helper()
	k := kafkatest.NewCluster(t, 2)
	store := settletest.NewStore(t, settle.Config{})
	s, err := service.New(service.Config{Store: store, Brokers: k.Brokers, AdminAddr: "127.0.0.1:0",
		Consumer: consumer.Config{SessionTimeout: time.Second}, ShutdownTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testnet.WaitFor(t, "service ready", 20*time.Second, s.Ready)
	return &rig{k: k, store: store}
}

func (r *rig) canary(t *testing.T, deadline time.Duration) *canary.Canary {
	t.Helper()
	c, err := canary.New(canary.Config{Brokers: r.k.Brokers, Deadline: deadline, RetryDelay: 500 * time.Millisecond, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func run(t *testing.T, c *canary.Canary) *canary.Report {
	t.Helper()
	rep, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestCanaryPasses: against the service on a loopback broker, every
// scenario (a duplicate in the same partition, a copy in another partition
// at the same moment, a retry after a delay, a conflicting payload, a
// correction, a refund) ends as the contract says, twice in a row, and the
// report says that the crash before the acknowledgement is the fault
// tier's to prove.
func TestCanaryPasses(t *testing.T) {
	t.Parallel()
	r := startService(t)
	c := r.canary(t, 30*time.Second)
	for i := 0; i < 2; i++ {
		rep := run(t, c)
		if !rep.Passed || len(rep.Outcomes) != len(canary.Scenarios) {
			t.Fatalf("run %d: %+v", i, rep)
		}
		for _, o := range rep.Outcomes {
			if o.Seconds <= 0 || len(o.Records) == 0 {
				t.Errorf("scenario %s: %+v, want its seconds to settlement and its records", o.Scenario, o)
			}
		}
		if !strings.Contains(rep.CrashNote, "fault tier") {
			t.Errorf("crash note %q", rep.CrashNote)
		}
	}
	if c.FailuresInARow() != 0 {
		t.Errorf("failures in a row %d after passes", c.FailuresInARow())
	}
}

// TestCanarySoak runs the canary once a minute for an hour against the
// service (SETTLE_CANARY_SOAK=1; SETTLE_CANARY_SOAK_DURATION to change the
// hour): every run must pass.
func TestCanarySoak(t *testing.T) {
	if os.Getenv("SETTLE_CANARY_SOAK") != "1" {
		t.Skip("the hour-long soak runs with SETTLE_CANARY_SOAK=1")
	}
	d := time.Hour
	if v := os.Getenv("SETTLE_CANARY_SOAK_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	r := startService(t)
	c, err := canary.New(canary.Config{Brokers: r.k.Brokers, Deadline: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(d)
	var runs int
	var worst float64
	for time.Now().Before(end) {
		start := time.Now()
		rep := run(t, c)
		runs++
		if !rep.Passed {
			t.Fatalf("run %d failed: %v\n%+v", runs, rep.Failed(), rep.Outcomes)
		}
		for _, o := range rep.Outcomes {
			worst = max(worst, o.Seconds)
		}
		time.Sleep(time.Minute - time.Since(start))
	}
	t.Logf("soak: %d runs over %s, all passed; slowest scenario %.2f s from send to settlement", runs, d, worst)
}
