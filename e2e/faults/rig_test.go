package faults

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/workload"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/reconcile"
	"github.com/settlehq/settle/settle/settletest"
)

// full reports whether the full tier runs (SETTLE_FAULTS_FULL=1); the quick
// tier, which `go test ./...` runs, does a few of each fault.
func full() bool { return os.Getenv("SETTLE_FAULTS_FULL") == "1" }

// rig is one broker, one fresh database and the workload with its model.
type rig struct {
	t      *testing.T
	broker *Broker
	url    string
	pool   *pgxpool.Pool
	wl     *workload.Workload
	tg     Target
}

func newRig(t *testing.T, seed uint64, brokers int, kopts ...kfake.Opt) *rig {
	t.Helper()
	url := settletest.NewDatabase(t)
	return newRigOn(t, url, seed, brokers, kopts...)
}

func newRigOn(t *testing.T, url string, seed uint64, brokers int, kopts ...kfake.Opt) *rig {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	// Named, so that fault injections that terminate the service's
	// backends spare the checker's.
	cfg.ConnConfig.RuntimeParams["application_name"] = "faults_checker"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b := NewBroker(t, brokers, kopts...)
	return &rig{t: t, broker: b, url: url, pool: pool, wl: newWorkload(t, seed, 60),
		tg: Target{Pool: pool, Brokers: b.Brokers}}
}

func newWorkload(t *testing.T, seed uint64, accounts int) *workload.Workload {
	t.Helper()
	w, err := NewWorkload(seed, accounts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (r *rig) produce(n int) { r.t.Helper(); r.broker.Produce(r.t, KafkaRecords(r.wl.Take(n))) }

func (r *rig) start(name, crashAt string) *Service {
	r.t.Helper()
	return Start(r.t, name, Options{DatabaseURL: r.url, Brokers: r.broker.Brokers, CrashAt: crashAt})
}

// check fails the test when an invariant is broken.
func (r *rig) check(final bool) Report {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var expect []workload.Account
	if final {
		expect = r.wl.Model().Accounts()
	}
	rep, err := Check(ctx, r.tg, final, expect)
	if err != nil {
		r.t.Fatalf("check: %v", err)
	}
	if !rep.OK() {
		r.t.Fatalf("invariant broken: %s", rep)
	}
	return rep
}

// waitDone waits until the running services have caught up.
func (r *rig) waitDone(d time.Duration, svcs ...*Service) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := WaitFor(ctx, func() (bool, error) { return Done(ctx, r.tg) }); err != nil {
		for _, s := range svcs {
			r.t.Logf("%s log tail:\n%s", s.Name, tail(s.Log(), 3000))
		}
		rep, _ := Check(context.Background(), r.tg, false, nil)
		// Done also needs Kafka's commits at the end of every partition
		// and an empty outbox, which a non-final Check does not report.
		committed, ends, _ := kafkaOffsets(context.Background(), r.tg.Brokers, "settle", "usage")
		progress, _ := r.progress(context.Background())
		r.t.Fatalf("service did not catch up within %s: %s\n  kafka committed %v, end offsets %v, unpublished outbox rows %d\n  %s",
			d, rep, committed, ends, progress.Unpublished, kafkatest.DescribeGroup(context.Background(), r.tg.Brokers, "settle"))
	}
}

// progress reads how far the rig's database has got (deliveries,
// unpublished outbox rows), through reconcile.
func (r *rig) progress(ctx context.Context) (reconcile.Progress, error) {
	store, err := settle.Open(ctx, r.pool, settle.Config{})
	if err != nil {
		return reconcile.Progress{}, err
	}
	return reconcile.ReadProgress(ctx, store)
}

// drain runs an unarmed service until every record is settled, published
// and committed, stops it, and checks every invariant with the model.
func (r *rig) drain() Report {
	r.t.Helper()
	// Every service of this rig is dead now; a member the broker failed to
	// expire (kafkatest.RemoveDeadMembers says why) would keep its partitions from
	// the drain for ever.
	if n, err := kafkatest.RemoveDeadMembers(context.Background(), r.tg.Brokers, "settle"); err != nil {
		r.t.Fatalf("remove dead group members: %v", err)
	} else if n > 0 {
		r.t.Logf("removed %d dead member(s) from the group before the drain", n)
	}
	s := r.start("drain", "")
	r.waitDone(3*time.Minute, s)
	if err := s.Stop(30 * time.Second); err != nil {
		r.t.Errorf("drain service stop: %v\n%s", err, tail(s.Log(), 3000))
	}
	return r.check(true)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
