package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/consumer"
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
	res := RunResult{Name: er.name}
	// A broker of its own: one that served the runs before holds their
	// topics (the end-to-end runs leave ≈ 1.6 GB in it), and a half-rate
	// run on it measured p50 / p99 219 / 482 ms against 103 / 208 on a
	// fresh one, at the same rate and the same CPU per record.
	b, err := startBroker(ctx, c.BrokerArgv)
	if err != nil {
		return res, err
	}
	defer b.close()
	n := er.name + er.tag
	tp := topics{"usage-" + n, "results-" + n, "dlq-" + n, "settlements-" + n}
	if err := createTopics(ctx, b.addrs, int32(er.w.Partitions), tp); err != nil {
		return res, err
	}
	db, err := newDatabase(ctx, c.ServerURL, "e2e", c.Keep, c.HashPartitions)
	if err != nil {
		return res, err
	}
	defer db.drop()
	pool, err := db.pool(ctx, c.PoolConns)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	store, err := settle.Open(ctx, pool, settle.Config{BatchRecordsMax: c.BatchSize,
		SettlementsTopic: tp.settlements, ResultsTopic: tp.results, DeadLetterTopic: tp.dlq})
	if err != nil {
		return res, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Every instance but the first gets its own pool and store, as a
	// separate process would; all share the consumer group, and their
	// relays compete for the outbox lease. Each is the service `settle
	// run` runs, without its admin listener and sweeper.
	var svcs []*service.Service
	defer func() {
		for _, s := range svcs {
			s.Close()
		}
	}()
	for i := range max(1, er.instances) {
		st := store
		if i > 0 {
			p, err := db.pool(ctx, c.PoolConns)
			if err != nil {
				return res, err
			}
			defer p.Close()
			if st, err = settle.Open(ctx, p, store.Config()); err != nil {
				return res, err
			}
		}
		s, err := service.New(service.Config{Store: st, Brokers: b.addrs,
			Consumer:      consumer.Config{Group: "bench-" + n, Topic: tp.usage, ResultsTopic: tp.results, SessionTimeout: 10 * time.Second},
			Relay:         relay.Config{BatchRowsMax: 10_000, PollInterval: 20 * time.Millisecond},
			SweepInterval: -1, Logger: quiet})
		if err != nil {
			return res, err
		}
		svcs = append(svcs, s)
	}
	published := func() int64 {
		var n int64
		for _, s := range svcs {
			n += s.Published()
		}
		return n
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(50_000), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return res, err
	}
	defer prod.Close()

	var (
		expectedNew int64
		sentMu      sync.Mutex
		sent        = map[string]time.Time{} // paced runs: identity -> timestamp of its first record
		produced    atomic.Int64
		produceErr  atomic.Value
	)
	gen, err := er.w.generator()
	if err != nil {
		return res, err
	}
	produce := func(n int) {
		for range n {
			r := gen.Next()
			now := time.Now()
			if r.New() {
				expectedNew++
				if er.paced > 0 {
					sentMu.Lock()
					sent[r.Identity.String()] = now
					sentMu.Unlock()
				}
			}
			prod.Produce(ctx, &kgo.Record{Topic: tp.usage, Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: now},
				func(_ *kgo.Record, err error) {
					if err != nil {
						produceErr.CompareAndSwap(nil, err)
					}
				})
			produced.Add(1)
		}
	}

	// The service runs in this process; its context ends the consumer and
	// then the relay (which flushes), as `settle run` stops them.
	svcCtx, stopSvc := context.WithCancel(ctx)
	var svc sync.WaitGroup
	// A service that stops on its own (not because the run
	// stopped it) ends the run with its error instead of a timeout.
	var (
		runErrMu sync.Mutex
		runErr   error
	)
	ran := func(what string, i int, ctx context.Context, err error) {
		if err == nil || ctx.Err() != nil {
			return
		}
		runErrMu.Lock()
		defer runErrMu.Unlock()
		if runErr == nil {
			runErr = fmt.Errorf("%s %d: %w", what, i, err)
		}
	}
	// The service's peak RSS starts when it does, without what the bench
	// held before (the pre-load, the runs before).
	startService := func() {
		if !resetPeakRSS() {
			res.Notes = append(res.Notes, "peak RSS could not be reset: it includes what the bench held before the run")
		}
		for i, s := range svcs {
			svc.Add(1)
			go func() { defer svc.Done(); ran("service", i, svcCtx, s.Run(svcCtx)) }()
		}
	}
	stopService := func() { stopSvc(); svc.Wait() }
	defer stopService()

	settled := func() int64 {
		var n int64
		for _, s := range svcs {
			for _, v := range s.Counts() {
				n += v
			}
		}
		return n
	}
	var lat *latencyReader
	var m *meter
	if er.paced == 0 {
		// Pre-load, so neither the producer's CPU nor its buffers count
		// against the service.
		produce(er.w.Records)
		if err := prod.Flush(ctx); err != nil {
			return res, err
		}
		if e, ok := produceErr.Load().(error); ok {
			return res, fmt.Errorf("produce: %w", e)
		}
		prod.Close()
		if m, err = startMeter(ctx, c.ServerURL, db.name); err != nil {
			return res, err
		}
		startService()
	} else {
		startService()
		lat = startLatencyReader(ctx, b.addrs, tp.settlements, func(id string) (time.Time, bool) {
			sentMu.Lock()
			defer sentMu.Unlock()
			t, ok := sent[id]
			return t, ok
		})
		defer lat.stop()
		// Wait for the group to be joined, so the latency is the
		// pipeline's, not the first rebalance's.
		for !svcs[0].Ready() {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		if m, err = startMeter(ctx, c.ServerURL, db.name); err != nil {
			return res, err
		}
		lat.from.Store(time.Now().Add(c.LatencyWarmup).UnixNano())
		go func() {
			t0 := time.Now()
			tk := time.NewTicker(5 * time.Millisecond)
			defer tk.Stop()
			for int(produced.Load()) < er.w.Records && ctx.Err() == nil {
				<-tk.C
				want := min(er.w.Records, int(er.paced*time.Since(t0).Seconds()))
				produce(want - int(produced.Load()))
			}
		}()
	}

	stopProgress := c.progress(er.name, er.w.Records, settled, func() string {
		return fmt.Sprintf("published %d", published())
	})
	deadline := time.Now().Add(er.timeout)
	for {
		if e, ok := produceErr.Load().(error); ok {
			stopProgress()
			return res, fmt.Errorf("produce: %w", e)
		}
		runErrMu.Lock()
		err := runErr
		runErrMu.Unlock()
		if err != nil {
			stopProgress()
			return res, err
		}
		if settled() >= int64(er.w.Records) {
			if n, _, err := inspect.New(store).OutboxBacklog(ctx); err == nil && n == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			stopProgress()
			return res, fmt.Errorf("%s: not done after %s: %d of %d records settled, %d published", er.name, er.timeout, settled(), er.w.Records, published())
		}
		select {
		case <-ctx.Done():
			stopProgress()
			return res, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	stopProgress()
	if err := m.stop(ctx, &res, er.w.Records); err != nil {
		return res, err
	}
	res.PeakRSSBytes = peakRSS()
	stopService()
	if lat != nil {
		// Wait until every settlement the outbox holds has been read.
		var want int64
		if t, err := reconcile.Count(ctx, store); err == nil {
			want = t.OutboxSettlements
		}
		for end := time.Now().Add(30 * time.Second); lat.count() < want && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond)
		}
		lat.stop()
		steady, warm := lat.samples()
		res.Latency = summarise(steady, er.paced)
		res.Latency.WarmupSeconds = c.LatencyWarmup.Seconds()
		if w := summarise(warm, 0); w.Samples > 0 {
			res.Latency.WarmupSamples, res.Latency.WarmupP99ms = w.Samples, w.P99ms
		}
		if res.Latency.Stages, err = latencyStages(ctx, inspect.New(store), lat.steadySentAt); err != nil {
			return res, err
		}
		if lat.unknown.Load() > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("%d settlements named an identity the producer never sent", lat.unknown.Load()))
		}
	}
	if res.Outcomes, err = outcomeCounts(ctx, store); err != nil {
		return res, err
	}
	tc, err := readTopics(ctx, b.addrs, tp)
	if err != nil {
		return res, err
	}
	chk, err := check(ctx, store, er.w.Records, expectedNew, &tc)
	res.Checks = &chk
	return res, err
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

// settlementMsg is the part of a settlements message the bench reads.
type settlementMsg struct {
	SettlementID string              `json:"settlement_id"`
	Identity     settle.IdentityJSON `json:"identity"`
}

// latencyReader consumes the settlements topic while a paced run goes on and
// records, per settlement, the time from its input record's timestamp to
// its arrival here.
type latencyReader struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	lat     []time.Duration
	n       atomic.Int64
	unknown atomic.Int64
	once    sync.Once
	sentAt  func(identity string) (time.Time, bool)
	// from: records sent before it (Unix ns) are the warm-up's; until
	// it is set, every record is.
	from atomic.Int64
	warm []time.Duration
}

func startLatencyReader(ctx context.Context, brokers []string, topic string, sentAt func(string) (time.Time, bool)) *latencyReader {
	ctx, cancel := context.WithCancel(ctx)
	l := &latencyReader{cancel: cancel, done: make(chan struct{}), sentAt: sentAt}
	go func() {
		defer close(l.done)
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(10*time.Millisecond))
		if err != nil {
			return
		}
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				var m settlementMsg
				if json.Unmarshal(r.Value, &m) != nil {
					l.unknown.Add(1)
					return
				}
				id := m.Identity
				t, ok := sentAt(id.TenantID + "/" + id.AccountPeriod + "/" + id.RecordID + "/" + id.Operation)
				if !ok {
					l.unknown.Add(1)
					return
				}
				l.mu.Lock()
				if f := l.from.Load(); f == 0 || t.UnixNano() < f {
					l.warm = append(l.warm, now.Sub(t))
				} else {
					l.lat = append(l.lat, now.Sub(t))
				}
				l.mu.Unlock()
				l.n.Add(1)
			})
		}
	}()
	return l
}

func (l *latencyReader) count() int64 { return l.n.Load() + l.unknown.Load() }
func (l *latencyReader) stop()        { l.once.Do(func() { l.cancel(); <-l.done }) }

// samples returns the latencies of the records sent after the warm-up and
// of those sent during it.
func (l *latencyReader) samples() (steady, warm []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lat), slices.Clone(l.warm)
}

// steadySentAt is sentAt for the records sent after the warm-up.
func (l *latencyReader) steadySentAt(id string) (time.Time, bool) {
	t, ok := l.sentAt(id)
	from := l.from.Load()
	return t, ok && from != 0 && t.UnixNano() >= from
}

// readTopics reads the settlements and results topics from the start until
// they have been quiet for a second, and counts distinct settlement ids and
// distinct input coordinates with a result.
func readTopics(ctx context.Context, brokers []string, tp topics) (TopicCheck, error) {
	var tc TopicCheck
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(tp.settlements, tp.results),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return tc, err
	}
	defer cl.Close()
	ids := map[string]struct{}{}
	coords := map[[2]int64]struct{}{}
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return tc, ctx.Err()
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if r.Topic == tp.settlements {
				tc.SettlementMessages++
				var m settlementMsg
				if json.Unmarshal(r.Value, &m) == nil {
					ids[m.SettlementID] = struct{}{}
				}
				return
			}
			var res struct {
				Source settle.Coordinates `json:"source"`
			}
			if json.Unmarshal(r.Value, &res) == nil {
				coords[[2]int64{int64(res.Source.Partition), res.Source.Offset}] = struct{}{}
			}
		})
		if n == 0 {
			var fe error
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					fe = err
				}
			})
			if fe != nil {
				return tc, fe
			}
			break
		}
	}
	tc.DistinctSettlementIDs, tc.ResultCoordinates = int64(len(ids)), int64(len(coords))
	return tc, nil
}
