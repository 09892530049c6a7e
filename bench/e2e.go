package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/internal/workload"
	"github.com/settlehq/settle/relay"
	"github.com/settlehq/settle/service"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/reconcile"
)

// e2eRun runs the whole pipeline against the broker.
type e2eRun struct {
	name      string
	w         Workload
	paced     float64 // 0: pre-load every record, then drain at full speed; > 0: produce at this rate while it runs
	timeout   time.Duration
	instances int    // service instances in one consumer group, each with its own pool, consumer and relay; 0 = 1
	tag       string // added to the topics' and group's names: repeated runs on one broker start fresh
}

type topics struct{ usage, results, dlq, settlements string }

func (c *Config) runE2E(ctx context.Context, er e2eRun) (RunResult, error) {
	r := &e2e{c: c, er: er, res: RunResult{Name: er.name}, sent: map[string]time.Time{}}
	defer r.close()
	if err := r.setUp(ctx); err != nil {
		return r.res, err
	}
	var err error
	if er.paced == 0 {
		err = r.preloadThenStart(ctx)
	} else {
		err = r.startPaced(ctx)
	}
	if err != nil {
		return r.res, err
	}
	if err := r.waitDone(ctx); err != nil {
		return r.res, err
	}
	if err := r.meter.stop(ctx, &r.res, er.w.Records); err != nil {
		return r.res, err
	}
	r.res.PeakRSSBytes = peakRSS()
	r.stopService()
	if r.lat != nil {
		asBench(ctx, "latency", func(ctx context.Context) { err = r.readLatency(ctx) })
		if err != nil {
			return r.res, err
		}
	}
	asBench(ctx, "check", func(ctx context.Context) { err = r.check(ctx) })
	return r.res, err
}

// e2e is one end-to-end run under way: what it set up, what its producer
// sent, and its service instances running.
type e2e struct {
	c   *Config
	er  e2eRun
	res RunResult

	b     *broker
	tp    topics
	db    *database
	store *settle.Store
	svcs  []*service.Service
	prod  *kgo.Client
	gen   *workload.Workload
	undo  []func() // what close runs, last first, as deferred calls would

	expectedNew int64
	sentMu      sync.Mutex
	sent        map[string]time.Time // paced runs: identity -> timestamp of its first record
	produced    atomic.Int64
	produceErr  atomic.Value

	// The service runs in this process; cancelling its context ends the
	// consumer and then the relay (which flushes), as `settle run` stops
	// them.
	stopSvc context.CancelFunc
	svc     sync.WaitGroup
	// A service that stops on its own (not because the run stopped it)
	// ends the run with its error instead of a timeout.
	runErrMu sync.Mutex
	runErr   error

	meter *meter
	lat   *latencyReader // paced runs only
}

func (r *e2e) deferred(f func()) { r.undo = append(r.undo, f) }

func (r *e2e) close() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
}

// setUp starts the broker and its topics, the database and the store, the
// service instances and the producer.
func (r *e2e) setUp(ctx context.Context) error {
	c, er := r.c, r.er
	// A broker of its own: one that served the runs before holds their
	// topics (gigabytes of them), and a half-rate run on it measured about
	// twice the latency of a fresh one at the same rate and CPU per record.
	b, err := startBroker(ctx, c.BrokerArgv, filepath.Join(c.OutDir, "broker.log"))
	if err != nil {
		return err
	}
	r.b = b
	r.deferred(b.close)
	n := er.name + er.tag
	r.tp = topics{"usage-" + n, "results-" + n, "dlq-" + n, "settlements-" + n}
	if err := createTopics(ctx, b.addrs, int32(er.w.Partitions), r.tp); err != nil {
		return err
	}
	if r.db, err = newDatabase(ctx, c.ServerURL, "e2e", c.Keep, c.HashPartitions); err != nil {
		return err
	}
	r.deferred(r.db.drop)
	pool, err := r.db.pool(ctx, c.PoolConns)
	if err != nil {
		return err
	}
	r.deferred(pool.Close)
	r.store, err = settle.Open(ctx, pool, settle.Config{BatchRecordsMax: c.BatchSize,
		SettlementsTopic: r.tp.settlements, ResultsTopic: r.tp.results, DeadLetterTopic: r.tp.dlq})
	if err != nil {
		return err
	}
	if err := r.newServices(ctx, "bench-"+n); err != nil {
		return err
	}
	asBench(ctx, "load", func(context.Context) { r.prod, err = newProducer(b.addrs) })
	if err != nil {
		return err
	}
	r.deferred(r.prod.Close)
	if r.gen, err = er.w.generator(); err != nil {
		return err
	}
	r.deferred(r.stopService)
	return nil
}

// newServices makes the run's service instances in the consumer group
// group. Every instance but the first gets its own pool and store, as a
// separate process would; their relays compete for the outbox lease. Each
// is the service `settle run` runs, without its admin listener and sweeper.
func (r *e2e) newServices(ctx context.Context, group string) error {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r.deferred(func() {
		for _, s := range r.svcs {
			s.Close()
		}
	})
	for i := range max(1, r.er.instances) {
		st := r.store
		if i > 0 {
			p, err := r.db.pool(ctx, r.c.PoolConns)
			if err != nil {
				return err
			}
			r.deferred(p.Close)
			if st, err = settle.Open(ctx, p, r.store.Config()); err != nil {
				return err
			}
		}
		s, err := service.New(service.Config{Store: st, Brokers: r.b.addrs,
			Consumer: consumer.Config{Group: group, Topic: r.tp.usage, ResultsTopic: r.tp.results, SessionTimeout: 10 * time.Second,
				LanesMax: r.c.LanesMax},
			Relay:         relay.Config{BatchRowsMax: 10_000, PollInterval: 20 * time.Millisecond},
			SweepInterval: -1, Logger: quiet})
		if err != nil {
			return err
		}
		r.svcs = append(r.svcs, s)
	}
	return nil
}

// produce sends the workload's next n records to the usage topic.
func (r *e2e) produce(ctx context.Context, n int) {
	asBench(ctx, "load", func(ctx context.Context) { r.produceN(ctx, n) })
}

func (r *e2e) produceN(ctx context.Context, n int) {
	for range n {
		rec := r.gen.Next()
		now := time.Now()
		if rec.New() {
			r.expectedNew++
			if r.er.paced > 0 {
				r.sentMu.Lock()
				r.sent[rec.Identity.String()] = now
				r.sentMu.Unlock()
			}
		}
		r.prod.Produce(ctx, &kgo.Record{Topic: r.tp.usage, Partition: rec.Partition, Key: rec.Key, Value: rec.Value, Timestamp: now},
			func(_ *kgo.Record, err error) {
				if err != nil {
					r.produceErr.CompareAndSwap(nil, err)
				}
			})
		r.produced.Add(1)
	}
}

func (r *e2e) produceFailed() error {
	if e, ok := r.produceErr.Load().(error); ok {
		return fmt.Errorf("produce: %w", e)
	}
	return nil
}

// startService runs every instance until stopService. The service's peak
// RSS starts when it does, without what the bench held before (the
// pre-load, the runs before).
func (r *e2e) startService(ctx context.Context) {
	if !resetPeakRSS() {
		r.res.Notes = append(r.res.Notes, "peak RSS could not be reset: it includes what the bench held before the run")
	}
	svcCtx, stop := context.WithCancel(ctx)
	r.stopSvc = stop
	for i, s := range r.svcs {
		r.svc.Add(1)
		go func() { defer r.svc.Done(); r.ran(svcCtx, "service", i, s.Run(svcCtx)) }()
	}
}

func (r *e2e) stopService() {
	if r.stopSvc != nil {
		r.stopSvc()
	}
	r.svc.Wait()
}

// ran keeps the first error of a service that stopped while its context
// was still live.
func (r *e2e) ran(ctx context.Context, what string, i int, err error) {
	if err == nil || ctx.Err() != nil {
		return
	}
	r.runErrMu.Lock()
	defer r.runErrMu.Unlock()
	if r.runErr == nil {
		r.runErr = fmt.Errorf("%s %d: %w", what, i, err)
	}
}

func (r *e2e) serviceFailed() error {
	r.runErrMu.Lock()
	defer r.runErrMu.Unlock()
	return r.runErr
}

// preloadThenStart produces every record before the service starts, so
// neither the producer's CPU nor its buffers count against the service.
func (r *e2e) preloadThenStart(ctx context.Context) error {
	var err error
	asBench(ctx, "load", func(ctx context.Context) {
		r.produceN(ctx, r.er.w.Records)
		err = r.prod.Flush(ctx)
	})
	if err != nil {
		return err
	}
	if err := r.produceFailed(); err != nil {
		return err
	}
	r.prod.Close()
	if r.meter, err = startMeter(ctx, r.c.ServerURL, r.db.name); err != nil {
		return err
	}
	r.startService(ctx)
	return nil
}

// startPaced starts the service and the latency reader, then produces at
// the run's rate in the background once the group is joined.
func (r *e2e) startPaced(ctx context.Context) error {
	r.startService(ctx)
	asBench(ctx, "latency", func(ctx context.Context) {
		r.lat = startLatencyReader(ctx, r.b.addrs, r.tp.settlements, func(id string) (time.Time, bool) {
			r.sentMu.Lock()
			defer r.sentMu.Unlock()
			t, ok := r.sent[id]
			return t, ok
		})
	})
	r.deferred(r.lat.stop)
	// Wait for the group to be joined, so the latency is the pipeline's,
	// not the first rebalance's.
	for !r.svcs[0].Ready() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	var err error
	if r.meter, err = startMeter(ctx, r.c.ServerURL, r.db.name); err != nil {
		return err
	}
	r.lat.from.Store(time.Now().Add(r.c.LatencyWarmup).UnixNano())
	go func() {
		t0 := time.Now()
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for int(r.produced.Load()) < r.er.w.Records && ctx.Err() == nil {
			<-tk.C
			want := min(r.er.w.Records, int(r.er.paced*time.Since(t0).Seconds()))
			r.produce(ctx, want-int(r.produced.Load()))
		}
	}()
	return nil
}

func (r *e2e) settled() int64 {
	var n int64
	for _, s := range r.svcs {
		for _, v := range s.Counts() {
			n += v
		}
	}
	return n
}

func (r *e2e) published() int64 {
	var n int64
	for _, s := range r.svcs {
		n += s.Published()
	}
	return n
}

// waitDone waits until every record is settled and the outbox is empty; a
// producer's or a service's error, or the run's timeout, ends it first.
func (r *e2e) waitDone(ctx context.Context) error {
	er := r.er
	stopProgress := r.c.progress(er.name, er.w.Records, r.settled, func() string {
		return fmt.Sprintf("published %d", r.published())
	})
	defer stopProgress()
	deadline := time.Now().Add(er.timeout)
	for {
		if err := r.produceFailed(); err != nil {
			return err
		}
		if err := r.serviceFailed(); err != nil {
			return err
		}
		if r.settled() >= int64(er.w.Records) {
			if n, _, err := inspect.New(r.store).OutboxBacklog(ctx); err == nil && n == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done after %s: %d of %d records settled, %d published", er.name, er.timeout, r.settled(), er.w.Records, r.published())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// readLatency waits until every settlement the outbox holds has been read,
// then fills in the run's latency.
func (r *e2e) readLatency(ctx context.Context) error {
	lat, res := r.lat, &r.res
	var want int64
	if t, err := reconcile.Count(ctx, r.store); err == nil {
		want = t.OutboxSettlements
	}
	for end := time.Now().Add(30 * time.Second); lat.count() < want && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	lat.stop()
	steady, warm := lat.samples()
	res.Latency = summarise(steady, r.er.paced)
	res.Latency.WarmupSeconds = r.c.LatencyWarmup.Seconds()
	if w := summarise(warm, 0); w.Samples > 0 {
		res.Latency.WarmupSamples, res.Latency.WarmupP99ms = w.Samples, w.P99ms
	}
	var err error
	if res.Latency.Stages, err = latencyStages(ctx, inspect.New(r.store), lat.steadySentAt); err != nil {
		return err
	}
	if lat.unknown.Load() > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d settlements named an identity the producer never sent", lat.unknown.Load()))
	}
	return nil
}

// check counts the outcomes and checks the database and the topics against
// what was produced.
func (r *e2e) check(ctx context.Context) error {
	var err error
	if r.res.Outcomes, err = outcomeCounts(ctx, r.store); err != nil {
		return err
	}
	tc, err := readTopics(ctx, r.b.addrs, r.tp)
	if err != nil {
		return err
	}
	chk, err := check(ctx, r.store, r.er.w.Records, r.expectedNew, &tc)
	r.res.Checks = &chk
	return err
}

func createTopics(ctx context.Context, brokers []string, partitions int32, tp topics) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, tp.usage); err != nil {
		return fmt.Errorf("create topic %s: %w", tp.usage, err)
	}
	for _, t := range []string{tp.results, tp.dlq, tp.settlements} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, t); err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	return nil
}

func outcomeCounts(ctx context.Context, store *settle.Store) (map[string]int64, error) {
	cs, err := inspect.New(store).OutcomeCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, c := range cs {
		k := string(c.Outcome)
		if c.Reason != "" {
			k += "/" + c.Reason
		}
		out[k] += c.Count
	}
	return out, nil
}

// asBench runs f with the profiler label bench=part: f's goroutines, and
// the Kafka client goroutines they start, are the bench's own work (making
// load, reading the topics back), which a CPU profile of the bench can
// then leave out of the service's (BENCHMARKS.md, "Where the time goes").
func asBench(ctx context.Context, part string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("bench", part), f)
}
