package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
)

// coreRun settles a workload straight into Store.Settle: a generator cuts
// it into batches, writer w takes the partitions p with p % writers == w
// (so one account is only ever written by one writer, in order, as the
// consumer does) and settles them one batch after the other.
type coreRun struct {
	name    string
	w       Workload
	batch   int
	writers int
	// window, when > 0, calls onWindow each time that many more records
	// are settled, with the identities settled so far and the rate of the
	// window (the growth run).
	window   int
	onWindow func(identities int64, recordsPerSec float64)
}

func (c *Config) runCore(ctx context.Context, cr coreRun) (RunResult, error) {
	res := RunResult{Name: cr.name}
	db, err := newDatabase(ctx, c.ServerURL, "core", c.Keep, c.HashPartitions)
	if err != nil {
		return res, err
	}
	defer db.drop()
	pool, err := db.pool(ctx, int32(cr.writers+2))
	if err != nil {
		return res, err
	}
	defer pool.Close()
	store, err := settle.Open(ctx, pool, settle.Config{BatchRecordsMax: max(cr.batch, 1000)})
	if err != nil {
		return res, err
	}
	m, err := startMeter(ctx, c.ServerURL, db.name)
	if err != nil {
		return res, err
	}

	t := &coreTally{outcomes: map[string]int64{}}
	chans := make([]chan []message.Input, cr.writers)
	for i := range chans {
		chans[i] = make(chan []message.Input, 4)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return t.feed(gctx, cr, chans) })
	for _, ch := range chans {
		g.Go(func() error { return t.settle(gctx, store, ch) })
	}
	stopProgress := c.progress(cr.name, cr.w.Records, t.done.Load, nil)
	stopWindows := t.watchWindows(ctx, cr)
	err = g.Wait()
	stopWindows()
	stopProgress()
	if err != nil {
		return res, err
	}
	if err := m.stop(ctx, &res, cr.w.Records); err != nil {
		return res, err
	}
	res.Outcomes = t.outcomes
	chk, err := check(ctx, store, cr.w.Records, t.expectedNew, nil)
	res.Checks = &chk
	if err != nil {
		return res, err
	}
	slog.Debug("core run done", "name", cr.name)
	return res, nil
}

// coreTally is what a core run's writers have settled.
type coreTally struct {
	done, identities atomic.Int64
	outcomesMu       sync.Mutex
	outcomes         map[string]int64
	expectedNew      int64 // set by feed when it ends
}

// feed generates the workload and sends it to the writers in batches,
// writer wi taking the partitions p with p % writers == wi; it closes
// every channel when it ends.
func (t *coreTally) feed(ctx context.Context, cr coreRun, chans []chan []message.Input) error {
	defer func() {
		for _, ch := range chans {
			close(ch)
		}
	}()
	gen, err := cr.w.generator()
	if err != nil {
		return err
	}
	defer func() { t.expectedNew = gen.Model().ExpectedIdentities() }()
	pending := make([][]message.Input, cr.writers)
	for i := 0; i < cr.w.Records; i++ {
		r := gen.Next()
		wi := int(r.Partition) % cr.writers
		pending[wi] = append(pending[wi], message.Input{Topic: "usage", Partition: r.Partition,
			Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: time.Now()})
		if len(pending[wi]) == cr.batch {
			select {
			case chans[wi] <- pending[wi]:
			case <-ctx.Done():
				return ctx.Err()
			}
			pending[wi] = make([]message.Input, 0, cr.batch)
		}
	}
	for wi, p := range pending {
		if len(p) > 0 {
			select {
			case chans[wi] <- p:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// settle is one writer: it settles the batches of ch one after the other
// and counts their outcomes.
func (t *coreTally) settle(ctx context.Context, store *settle.Store, ch <-chan []message.Input) error {
	local := map[string]int64{}
	defer func() {
		t.outcomesMu.Lock()
		for k, v := range local {
			t.outcomes[k] += v
		}
		t.outcomesMu.Unlock()
	}()
	for batch := range ch {
		rs, err := store.Settle(ctx, "bench-core", store.Decode(batch))
		if err != nil {
			return fmt.Errorf("settle batch of partition %d from offset %d: %w", batch[0].Partition, batch[0].Offset, err)
		}
		var n int64
		for i := range rs {
			k := string(rs[i].Outcome)
			if rs[i].Reason != "" {
				k += "/" + rs[i].Reason
			}
			local[k]++
			if isNewIdentity(&rs[i]) {
				n++
			}
		}
		t.identities.Add(n)
		t.done.Add(int64(len(rs)))
	}
	return nil
}

// watchWindows calls cr.onWindow each time cr.window more records are
// settled, until the returned stop is called.
func (t *coreTally) watchWindows(ctx context.Context, cr coreRun) (stop func()) {
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	if cr.window > 0 && cr.onWindow != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next, last, lastT := int64(cr.window), int64(0), time.Now()
			emit := func(d int64) {
				now := time.Now()
				cr.onWindow(t.identities.Load(), float64(d-last)/now.Sub(lastT).Seconds())
				last, lastT, next = d, now, d+int64(cr.window)
			}
			tk := time.NewTicker(20 * time.Millisecond)
			defer tk.Stop()
			for {
				select {
				case <-ctx.Done():
					// The run's end is the point a growth curve is
					// about: a last window of at least half the size
					// counts (a sliver's rate would be noise), and a run
					// shorter than one window gets its one point.
					if d := t.done.Load(); d > last && (d-last >= int64(cr.window)/2 || last == 0) {
						emit(d)
					}
					return
				case <-tk.C:
				}
				if d := t.done.Load(); d >= next {
					emit(d)
				}
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// isNewIdentity says whether a result is the first of its identity.
func isNewIdentity(r *message.Result) bool {
	switch r.Outcome {
	case message.OutcomeDuplicate, message.OutcomeDeadLettered:
		return false
	case message.OutcomeQuarantined:
		return r.Reason != message.ReasonFingerprintMismatch
	}
	return !r.Redelivered
}

// progress prints a progress line every 2 seconds until the returned stop
// is called.
func (c *Config) progress(name string, total int, done func() int64, extra func() string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t0, last, lastT := time.Now(), int64(0), time.Now()
		tk := time.NewTicker(2 * time.Second)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tk.C:
				d := done()
				line := fmt.Sprintf("bench %-14s %9d/%d records  %7.0f/s now  %7.0f/s avg  rss %4d MiB",
					name, d, total, float64(d-last)/now.Sub(lastT).Seconds(), float64(d)/now.Sub(t0).Seconds(), rss()>>20)
				if extra != nil {
					line += "  " + extra()
				}
				fmt.Fprintln(c.Log, line)
				last, lastT = d, now
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}
