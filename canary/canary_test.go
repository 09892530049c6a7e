package canary_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/canary"
	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/service"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
	"github.com/settlehq/settle/telemetry"
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
	start(t, k, store)
	return &rig{k: k, store: store}
}

// forwardSecondSettlement republishes, until ctx ends, every settlement of
// a canary same-partition usage under a new settlement_id and a later
// sequence: what a build that settled the duplicate again would publish.
// Every other canary settlement of a delayed retry it republishes once,
// byte for byte, as the relay does after a crash.
func forwardSecondSettlement(ctx context.Context, t *testing.T, k *kafkatest.Cluster) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ConsumeTopics("settlements"), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { <-done; cl.Close() })
	go func() {
		defer close(done)
		repeated := map[string]bool{}
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
				var m message.Response
				if json.Unmarshal(rec.Value, &m) != nil {
					return
				}
				if strings.HasSuffix(m.Identity.RecordID, "-retry") && !repeated[m.SettlementID] {
					repeated[m.SettlementID] = true
					cl.Produce(ctx, &kgo.Record{Topic: "settlements", Key: rec.Key, Value: rec.Value, Headers: rec.Headers}, nil)
				}
				if !strings.HasSuffix(m.Identity.RecordID, "-same") || m.SettlementID == "again" {
					return
				}
				m.SettlementID, m.Sequence = "again", m.Sequence+100
				v, _ := json.Marshal(m)
				cl.Produce(ctx, &kgo.Record{Topic: "settlements", Key: rec.Key, Value: v, Headers: rec.Headers}, nil)
			})
		}
	}()
}

// startTwo runs two instances of the service in one group over one
// database, as a deployment of two replicas does: each settles one of the
// usage topic's two partitions with a store of its own.
func startTwo(t *testing.T) *rig {
	t.Helper()
	k := kafkatest.NewCluster(t, 2)
	url := settletest.NewDatabase(t)
	first := settletest.NewStoreOn(t, url, settle.Config{})
	// A session long enough that a loaded host's late heartbeat does not
	// drop a member: one that owns both partitions settles both copies in
	// turn, and the copies would never meet in flight.
	steady := func(cfg *service.Config) { cfg.Consumer.SessionTimeout = 10 * time.Second }
	a := start(t, k, first, steady)
	b := start(t, k, settletest.NewStoreOn(t, url, settle.Config{}), steady)
	testnet.WaitFor(t, "both instances ready", 30*time.Second, func() bool { return a.Ready() && b.Ready() })
	return &rig{k: k, store: first}
}

func start(t *testing.T, k *kafkatest.Cluster, store *settle.Store, with ...func(*service.Config)) *service.Service {
	t.Helper()
	cfg := service.Config{Store: store, Brokers: k.Brokers, AdminAddr: "127.0.0.1:0",
		Consumer: consumer.Config{SessionTimeout: time.Second}, ShutdownTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range with {
		f(&cfg)
	}
	s, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testnet.WaitFor(t, "service ready", 20*time.Second, s.Ready)
	return s
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

// TestCanaryRedWithoutUniqueKey: two replicas of the service over one
// database, each settling one partition. With the identity unique key the
// canary passes; with it dropped (identities_scope_key, as a build that
// lost it would run), the copy sent to another partition at the same
// moment, and the conflicting payload sent for another account there, are
// each claimed by both replicas and settle twice: the canary fails naming
// those scenarios, and only those.
func TestCanaryRedWithoutUniqueKey(t *testing.T) {
	t.Parallel()
	r := startTwo(t)
	c := r.canary(t, 20*time.Second)
	if rep := run(t, c); !rep.Passed {
		t.Fatalf("two replicas with the unique key: %v failed\n%+v", rep.Failed(), rep.Outcomes)
	}
	settletest.Bypass(t, r.store.Pool(), `ALTER TABLE identities DROP CONSTRAINT identities_scope_key`)
	slowConflicts(t, r)
	for i := 0; i < 5; i++ {
		rep := run(t, c)
		if rep.Passed {
			continue // the two copies did not meet in flight this time
		}
		for _, o := range rep.Outcomes {
			t.Logf("%s ok=%v %s", o.Scenario, o.OK, o.Problem)
			if !o.OK && o.Scenario != canary.ScenarioOtherPartition && o.Scenario != canary.ScenarioConflict {
				t.Errorf("scenario %s failed: only the copies on two partitions meet in flight", o.Scenario)
			}
			if !o.OK && !strings.Contains(o.Problem, "results [settled settled]") {
				t.Errorf("scenario %s: %q, want both copies settled", o.Scenario, o.Problem)
			}
		}
		if c.FailuresInARow() != 1 {
			t.Errorf("failures in a row: %d, want 1", c.FailuresInARow())
		}
		return
	}
	t.Fatal("five runs passed without the unique key")
}

// slowConflicts makes the insert of a canary identity sent to two
// partitions take 1.5 s (wide enough for two replicas polling apart on a loaded host), so that the two replicas' transactions, which
// share no lock but the identity's key, are in flight together.
func slowConflicts(t *testing.T, r *rig) {
	t.Helper()
	settletest.Bypass(t, r.store.Pool(), `
		CREATE FUNCTION canary_slow() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_sleep(1.5); RETURN NEW; END $$;
		CREATE TRIGGER canary_slow BEFORE INSERT ON identities FOR EACH ROW
		  WHEN (NEW.tenant_id = 'settle-canary' AND (NEW.record_id LIKE '%-conflict' OR NEW.record_id LIKE '%-copy')) EXECUTE FUNCTION canary_slow();`)
}

// TestCanaryRedOnSettlementPublishedTwice: a pipeline that publishes a
// second settlement for one record (a forwarder on the broker republishes
// the canary's same-partition usage settlement under a new settlement_id
// and the account's next sequence, as a build that settled the duplicate
// again would) turns the canary red naming that scenario, while its
// results still look right. The relay's own repeat of a message, byte for
// byte (here of the delayed retry's settlement), is one settlement and
// passes.
func TestCanaryRedOnSettlementPublishedTwice(t *testing.T) {
	t.Parallel()
	r := startService(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	forwardSecondSettlement(ctx, t, r.k)
	rep := run(t, r.canary(t, 20*time.Second))
	if f := rep.Failed(); len(f) != 1 || f[0] != canary.ScenarioSamePartition {
		t.Fatalf("failed %v, want only %s\n%+v", f, canary.ScenarioSamePartition, rep.Outcomes)
	}
	o := rep.Outcomes[0]
	t.Logf("%s: %s", o.Scenario, o.Problem)
	if !strings.Contains(o.Problem, "settled twice") || !strings.Contains(strings.Join(o.Records, "\n"), "settlement usage") {
		t.Fatalf("problem %q records %v: want the two settlements named", o.Problem, o.Records)
	}
	for _, o := range rep.Outcomes {
		if o.Scenario == canary.ScenarioDelayedRetry && strings.Count(strings.Join(o.Records, "\n"), "settlement usage") != 2 {
			t.Errorf("retry's records %v: want its settlement read twice (the repeat)", o.Records)
		}
	}
}

// TestCanaryInRunFailsReadiness: `settle run --canary-every 10s
// --canary-unready-after 1` in library form. Against a pipeline that
// publishes a second settlement, /readyz answers 503 naming the canary
// after one failed run, and the failure is counted per scenario on
// /metrics; once the pipeline is right again, the next pass makes it
// ready and sets the last full pass.
func TestCanaryInRunFailsReadiness(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	store := settletest.NewStore(t, settle.Config{})
	tel, err := telemetry.New(context.Background(), telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	forwardSecondSettlement(ctx, t, k)
	s := start(t, k, store, func(c *service.Config) {
		c.CanaryEvery, c.CanaryUnreadyAfter, c.Telemetry = 10*time.Second, 1, tel
	})
	admin := "http://" + s.AdminAddr().String()
	testnet.WaitFor(t, "/readyz 503 naming the canary", 60*time.Second, func() bool {
		code, body := testnet.HTTPGet(admin + "/readyz")
		return code == 503 && strings.Contains(body, "canary: 1 runs in a row failed")
	})
	_, metrics := testnet.HTTPGet(admin + "/metrics")
	if !strings.Contains(metrics, `settle_canary_failures_total{scenario="duplicate_same_partition"`) ||
		strings.Contains(metrics, `settle_canary_failures_total{scenario="refund"`) {
		t.Errorf("/metrics does not count the one failed scenario:\n%s", grep(metrics, "settle_canary"))
	}
	cancel() // the pipeline is right again
	testnet.WaitFor(t, "/readyz 200 after a pass", 60*time.Second, func() bool {
		code, _ := testnet.HTTPGet(admin + "/readyz")
		return code == 200
	})
	// Every run's conflict case was rejected by the service's canary.
	if n := settletest.Count(t, store.Pool(), `SELECT count(*) FROM conflict_cases WHERE tenant_id = $1 AND status = 'open'`, canary.Tenant); n != 0 {
		t.Errorf("%d canary conflict cases open, want every one resolved", n)
	}
	if n := settletest.Count(t, store.Pool(), `SELECT count(*) FROM conflict_cases WHERE tenant_id = $1`, canary.Tenant); n < 2 {
		t.Errorf("%d canary conflict cases, want one per run (two runs at least)", n)
	}
	_, metrics = testnet.HTTPGet(admin + "/metrics")
	if !strings.Contains(metrics, "settle_canary_last_pass_seconds ") || !strings.Contains(metrics, `settle_canary_latency_seconds_bucket{scenario="refund"`) {
		t.Errorf("/metrics lacks the last pass or the latency:\n%s", grep(metrics, "settle_canary"))
	}
}

func grep(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
