package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/proctest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/reconcile"
)

// instance is one `settle run` member of a group.
type instance struct {
	*proctest.Process
	admin string
	r     runner
}

// runner starts `settle run` members of one group on one database and
// broker, with a short session timeout so a killed member is noticed in
// about two seconds instead of 45.
type runner struct {
	t       *testing.T
	url     string
	brokers []string
	group   string
}

func (r runner) start(name string) *instance {
	admin := testnet.FreeAddr(r.t)
	p := startSettle(r.t, name, nil, "run",
		"--database-url", r.url, "--brokers", strings.Join(r.brokers, ","), "--group", r.group,
		"--admin-addr", admin, "--session-timeout", "2s", "--backoff-max", "1s", "--shutdown-timeout", "20s",
		"--pool-max-conns", "8")
	return &instance{Process: p, admin: admin, r: r}
}

// readiness returns /readyz's answer: ready, and whether it leads the relay.
func (i *instance) readiness() (ready, leader bool) {
	code, body := testnet.HTTPGet("http://" + i.admin + "/readyz")
	var r struct {
		RelayLeader bool `json:"relay_leader"`
	}
	_ = json.Unmarshal([]byte(body), &r) // no answer is no JSON: not the leader
	return code == 200, r.RelayLeader
}

// stop sends SIGTERM and expects a clean exit (code 0) within a bound.
func (i *instance) stop(t *testing.T) {
	t.Helper()
	signal(t, i.Process, syscall.SIGTERM)
	if code := i.ExitCode(40 * time.Second); code != 0 {
		t.Errorf("settle %s after SIGTERM: exit %d, want 0", i.Name, code)
	}
}

type offsetSamples struct {
	n, errs    int
	violations []string
}

// sampleOffsets compares the group's Kafka commits with PostgreSQL's
// offsets every 200ms until stop closes. Kafka is read first: PostgreSQL's
// offsets only grow, so a live pipeline cannot cause a false alarm.
func sampleOffsets(brokers []string, pool *pgxpool.Pool, group string, stop <-chan struct{}) offsetSamples {
	var out offsetSamples
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		out.violations = append(out.violations, err.Error())
		return out
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return out
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resps, err := adm.FetchOffsets(ctx, group)
		kafka := map[int32]int64{}
		if err == nil {
			resps.Each(func(r kadm.OffsetResponse) {
				if r.Topic == "usage" && r.Err == nil && r.At >= 0 {
					kafka[r.Partition] = r.At
				}
			})
		}
		var found []reconcile.Finding
		if err == nil {
			var store *settle.Store
			if store, err = settle.Open(ctx, pool, settle.Config{}); err == nil {
				found, err = reconcile.CheckKafkaOffsets(ctx, store, group, map[string]map[int32]int64{"usage": kafka})
			}
		}
		cancel()
		if err != nil {
			out.errs++ // the group may not exist yet; a busy broker may time out
			continue
		}
		out.n++
		for _, f := range found {
			if len(out.violations) < 20 {
				out.violations = append(out.violations, "offsets (sampled while running): "+f.Class+": "+f.Detail)
			}
		}
	}
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestKillMidStream is the end-to-end proof of issue 3: 100,000 records
// over 6 partitions (30% duplicates, some on other partitions; 1%
// conflicts) through two `settle run` processes in one group; the relay
// leader is SIGKILLed when about a third is settled; a third member joins
// and leaves (two more rebalances); the killed one is restarted. Then every
// invariant of check holds, and check itself is shown to catch a broken
// state.
func TestKillMidStream(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: the kill test settles 100,000 records")
	}
	began := time.Now()
	const total, partitions = 100_000, 6
	k := kafkatest.NewCluster(t, partitions)
	url := emptyDatabase(t)
	migrateDB(t, url)
	pool := openPool(t, url)
	w := newWorkload(3, total, partitions)
	t.Logf("workload: %s", w)

	// Half the records before the members start, the rest while they work.
	cl := producer(t, k.Brokers)
	w.produce(t, cl, 0, total/2)
	r := runner{t: t, url: url, brokers: k.Brokers, group: "e2e-kill"}
	a, b := r.start("a"), r.start("b")
	var producing sync.WaitGroup
	t.Cleanup(producing.Wait) // before the producer closes, even when the test fails early
	producing.Go(func() {
		for from := total / 2; from < total; from += 5000 {
			time.Sleep(250 * time.Millisecond)
			w.produce(t, cl, from, min(from+5000, total))
		}
	})

	running := map[*instance]bool{a: true, b: true}
	var mu sync.Mutex
	alive := func() error {
		mu.Lock()
		defer mu.Unlock()
		for i := range running {
			if i.Exited() {
				return fmt.Errorf("settle %s exited on its own (code %d)", i.Name, i.ExitCode(0))
			}
		}
		return nil
	}
	setRunning := func(i *instance, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			running[i] = true
		} else {
			delete(running, i)
		}
	}

	// Kafka's commits must never be ahead of PostgreSQL's offsets, not
	// only at the end: sample them through the kill and the rebalances.
	sampleStop, samples := make(chan struct{}), make(chan offsetSamples, 1)
	go func() { samples <- sampleOffsets(k.Brokers, pool, r.group, sampleStop) }()

	waitDeliveries(t, pool, total/3, 2*time.Minute, alive)
	victim, survivor := a, b
	if _, leads := b.readiness(); leads {
		victim, survivor = b, a
	}
	_, victimLed := victim.readiness()
	setRunning(victim, false)
	signal(t, victim.Process, syscall.SIGKILL)
	if code := victim.ExitCode(10 * time.Second); code != -1 {
		t.Fatalf("settle %s after SIGKILL: exit %d, want killed", victim.Name, code)
	}
	atKill := countDeliveries(t, pool)
	t.Logf("SIGKILL settle %s (relay leader: %v) at %d of %d deliveries, %s in", victim.Name, victimLed, atKill, total, time.Since(began).Round(time.Millisecond))

	// Force more rebalances: a third member joins, works a moment, leaves.
	c := r.start("c")
	setRunning(c, true)
	waitReady(t, c, alive)
	atJoin := countDeliveries(t, pool)
	time.Sleep(time.Second)
	setRunning(c, false)
	c.stop(t)
	atLeave := countDeliveries(t, pool)
	t.Logf("settle c joined at %d deliveries, left (SIGTERM, exit 0) at %d", atJoin, atLeave)

	restarted := r.start(victim.Name + "-restarted")
	setRunning(restarted, true)
	// Ready before it is stopped: the run may well finish first now, and a
	// SIGTERM before the process has its signal handler kills it outright.
	waitReady(t, restarted, alive)
	producing.Wait()
	if t.Failed() {
		t.FailNow()
	}
	waitDeliveries(t, pool, total, 3*time.Minute, alive)
	deadline := time.Now().Add(time.Minute)
	for outboxBacklog(t, pool) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("outbox not published within a minute of the last delivery")
		}
		time.Sleep(100 * time.Millisecond)
	}
	settledIn := time.Since(began)
	close(sampleStop)
	sampled := <-samples
	for _, v := range sampled.violations {
		t.Error(v)
	}
	t.Logf("offsets sampled %d times while running: %d errors reading them, %d times kafka ahead", sampled.n, sampled.errs, len(sampled.violations))
	setRunning(restarted, false)
	setRunning(survivor, false)
	restarted.stop(t)
	survivor.stop(t)

	f := check(t, pool, k.Brokers, r.group, w)
	for _, p := range f.problems {
		t.Error(p)
	}
	// A relay that dies after the broker acknowledged a round but before
	// marking it published republishes at most that round (1,000 rows, the
	// relay's BatchRowsMax); one kill explains at most that many repeats.
	const kills, roundRowsMax = 1, 1000
	if f.settlementsRepeats > kills*roundRowsMax {
		t.Errorf("settlements: %d raw repeats, more than %d kill(s) can explain (%d each)", f.settlementsRepeats, kills, roundRowsMax)
	}
	t.Logf("figures: %d input records, %d kill, %d deliveries %v (as the model), settlements %d raw / %d distinct (%d repeats), %d results, kafka offsets %v, end offsets %v; settled in %s, checked in %s",
		len(w.coords), kills, f.deliveries, w.outcomes, f.settlementsRaw, f.settlementsUnique, f.settlementsRepeats, f.results,
		f.kafkaOffsets, f.endOffsets, settledIn.Round(time.Millisecond), (time.Since(began) - settledIn).Round(time.Millisecond))
	if t.Failed() {
		return
	}

	// The checker must be able to fail: break four invariants by hand (and
	// the model) and see reconcile catch each.
	t.Run("BrokenVariant", func(t *testing.T) {
		ctx := context.Background()
		// An identity settled twice: a second copy of its ledger row (the
		// append-only trigger allows inserts, as it must).
		if _, err := pool.Exec(ctx, `INSERT INTO ledger_entries (id, identity_id, account_id, tenant_id, bucket, amount)
			SELECT (SELECT max(n.id) + 1 FROM ledger_entries n WHERE n.tenant_id = e.tenant_id AND n.account_id = e.account_id),
			       identity_id, account_id, tenant_id, bucket, amount
			  FROM ledger_entries e ORDER BY identity_id, id LIMIT 1`); err != nil {
			t.Fatal(err)
		}
		// Kafka committed ahead of PostgreSQL, as a consumer that commits
		// before its transaction would leave it after a crash.
		adm, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
		if err != nil {
			t.Fatal(err)
		}
		defer adm.Close()
		var offs kadm.Offsets
		// PostgreSQL's offset is the end offset (reconcile found every
		// record below it delivered and none past it, no gap below
		// PostgreSQL's offset): ten past it is ahead.
		offs.Add(kadm.Offset{Topic: "usage", Partition: 0, At: f.endOffsets[0] + 10, LeaderEpoch: -1})
		if resp, err := kadm.NewClient(adm).CommitOffsets(ctx, r.group, offs); err != nil || resp.Error() != nil {
			t.Fatalf("commit ahead: %v %v", err, resp.Error())
		}
		// A settlement nobody settled, for a tenant and period of the run,
		// and a message that is no settlement at all.
		k.Produce(t, &kgo.Record{Topic: "settlements", Value: []byte(`{"settlement_id":"forged","sequence":1,` +
			`"identity":{"tenant_id":"` + f.tenant + `","account_period":"2026-11","record_id":"forged","operation":"usage"}}`),
			Headers: []kgo.RecordHeader{{Key: "settlement_id", Value: []byte("forged")}}})
		k.Produce(t, &kgo.Record{Topic: "settlements", Value: []byte(`{"settlement_id":"anonymous","sequence":1}`),
			Headers: []kgo.RecordHeader{{Key: "settlement_id", Value: []byte("anonymous")}}})

		// A model that expects another effect: two identities one cent off
		// (two, so that one is not the identity whose row was doubled).
		moved := 0
		for id, e := range w.effects {
			if moved++; moved > 2 {
				break
			}
			e.Balance++
			w.effects[id] = e
		}

		broken := check(t, pool, k.Brokers, r.group, w)
		for _, want := range []string{reconcile.ClassEffectRepeated + ":", reconcile.ClassBalanceMismatch + ":",
			reconcile.ClassKafkaOffsetAhead + ": group " + r.group + " committed offset " + fmt.Sprint(f.endOffsets[0]+10) + " in Kafka for usage/0,",
			reconcile.ClassSettlementNoIdentity + ":", "settlements: message", reconcile.ClassIdentityModelMismatch + ":"} {
			caught := false
			for _, p := range broken.problems {
				caught = caught || strings.Contains(p, want)
			}
			if !caught {
				t.Errorf("the checker missed a broken invariant (%q); it reported: %q", want, broken.problems)
			}
		}
		t.Logf("broken variant: the checker reported %d problems:\n%s", len(broken.problems), strings.Join(broken.problems, "\n"))
	})
}

// brokerGoroutines is the stacks of this process's goroutines that are in
// kfake's group coordinator: where the in-process broker is if it stops
// answering group requests.
func brokerGoroutines() string {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "kfake.(*group") || strings.Contains(g, "kfake.(*groups") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// waitReady waits until p answers /readyz with 200, failing the test if a
// member dies or 30 s pass.
func waitReady(t *testing.T, p *instance, alive func() error) {
	t.Helper()
	start := time.Now()
	slow := false
	for ready, _ := p.readiness(); !ready; ready, _ = p.readiness() {
		if err := alive(); err != nil {
			t.Fatal(err)
		}
		waited := time.Since(start)
		if waited > 10*time.Second && !slow {
			// A rebalance waits for every member to rejoin (up to the
			// rebalance timeout, 60 s), and a member rejoins between polls:
			// before members yielded between batches, a survivor holding a
			// 50,000-record poll on a loaded machine stalled the group's
			// commits and this join for over 40 s. Say who the group waits
			// for while it still waits.
			slow = true
			_, body := testnet.HTTPGet("http://" + p.admin + "/readyz")
			t.Logf("settle %s not ready after %s: /readyz says %s\n%s\nthe broker's group goroutines (kfake runs in this process):\n%s",
				p.Name, waited.Round(time.Millisecond), body, kafkatest.DescribeGroup(context.Background(), p.r.brokers, p.r.group), brokerGoroutines())
		}
		if waited > 30*time.Second {
			t.Fatalf("settle %s not ready within 30s", p.Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
