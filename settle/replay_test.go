package settle_test

// The replay harness: the same records delivered again in four scenarios
// (duplicate, timeout-then-retry, crash-before-ack, concurrent) to a handler,
// counting the effects per identity afterwards. settle's own handler must
// show exactly one effect per identity in every scenario; the strawmen,
// kept here in test code only, show the failures they are known for — proof
// that the checks can fail.

import (
	"context"

	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// handler is one way of applying usage records.
type handler interface {
	// deliver applies a batch; an error means the caller does not know
	// whether it took effect and will retry.
	deliver(ctx context.Context, ins []message.Input) error
	// effects counts ledger effects per record_id.
	effects(ctx context.Context) (map[string]int, error)
}

// settleHandler is settle's own core.
type settleHandler struct{ s *settle.Store }

func (h settleHandler) deliver(ctx context.Context, ins []message.Input) error {
	_, err := h.s.Settle(ctx, "", h.s.Decode(ins))
	return err
}

func (h settleHandler) effects(ctx context.Context) (map[string]int, error) {
	return countEffects(ctx, h.s.Pool(), `SELECT i.record_id, count(e.*) FROM identities i JOIN ledger_entries e ON e.identity_id = i.id GROUP BY 1`)
}

// strawman handlers write to their own tables (created here), one row per
// effect, with record_id as the claim key.
type strawman struct {
	pool *pgxpool.Pool
	kind string // naive | check_then_act | guarded_raises
}

func newStrawman(t *testing.T, kind string) *strawman {
	pool := settletest.NewPool(t, 32)
	_, err := pool.Exec(context.Background(), `
		CREATE TABLE straw_claims (record_id text PRIMARY KEY);
		CREATE TABLE straw_checked (record_id text);
		CREATE TABLE straw_ledger (record_id text, amount numeric)`)
	if err != nil {
		t.Fatal(err)
	}
	return &strawman{pool: pool, kind: kind}
}

func (h *strawman) deliver(ctx context.Context, ins []message.Input) error {
	for _, in := range ins {
		id := recordID(in)
		err := pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
			switch h.kind {
			case "check_then_act":
				var seen bool
				if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM straw_checked WHERE record_id = $1)`, id).Scan(&seen); err != nil {
					return err
				}
				if seen {
					return nil
				}
				if _, err := tx.Exec(ctx, `INSERT INTO straw_checked VALUES ($1)`, id); err != nil {
					return err
				}
			case "guarded_raises":
				// A unique claim in the same transaction: a second attempt
				// fails with a unique violation, which the caller sees as an
				// error and retries.
				if _, err := tx.Exec(ctx, `INSERT INTO straw_claims VALUES ($1)`, id); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `INSERT INTO straw_ledger VALUES ($1, 1)`, id)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (h *strawman) effects(ctx context.Context) (map[string]int, error) {
	return countEffects(ctx, h.pool, `SELECT record_id, count(*) FROM straw_ledger GROUP BY 1`)
}

func recordID(in message.Input) string {
	// The harness's records are produced by rec(); their record_id is all a
	// strawman keys on.
	var r struct {
		RecordID string `json:"record_id"`
	}
	if err := jsonUnmarshal(in.Value, &r); err != nil {
		panic(err)
	}
	return r.RecordID
}

func countEffects(ctx context.Context, pool *pgxpool.Pool, q string) (map[string]int, error) {
	rows, err := pool.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	m := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		m[id] = n
	}
	return m, rows.Err()
}

// scenario delivers recs to h as one of the four delivery scenarios and
// returns how many errors the handler raised along the way.
type scenario func(ctx context.Context, h handler, trial int, recs []map[string]any) (errs int)

var scenarios = []struct {
	name string
	run  scenario
}{
	{"duplicate", func(ctx context.Context, h handler, trial int, recs []map[string]any) int {
		errs := 0
		for p := int32(0); p < 2; p++ { // the same records twice, as two producer sends
			if h.deliver(ctx, batch(p, int64(trial*100), recs...)) != nil {
				errs++
			}
		}
		return errs
	}},
	{"timeout_then_retry", func(ctx context.Context, h handler, trial int, recs []map[string]any) int {
		// The first attempt times out at a random point (before, during or
		// after its commit); the client retries until one attempt answers.
		errs := 0
		short, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(4000))*time.Microsecond)
		if h.deliver(short, batch(0, int64(trial*100), recs...)) != nil {
			errs++
		}
		cancel()
		for attempt := int32(1); attempt < 20; attempt++ {
			if h.deliver(ctx, batch(attempt, int64(trial*100), recs...)) == nil {
				break
			}
			errs++
		}
		return errs
	}},
	{"crash_before_ack", func(ctx context.Context, h handler, trial int, recs []map[string]any) int {
		// Committed, acknowledgement lost: the broker redelivers the very
		// same coordinates.
		errs := 0
		for i := 0; i < 2; i++ {
			if h.deliver(ctx, batch(0, int64(trial*100), recs...)) != nil {
				errs++
			}
		}
		return errs
	}},
	{"concurrent", func(ctx context.Context, h handler, trial int, recs []map[string]any) int {
		// 16 connections race on the same identities.
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs int
		)
		start := make(chan struct{})
		for w := int32(0); w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := h.deliver(ctx, batch(w, int64(trial*100), recs...)); err != nil {
					mu.Lock()
					errs++
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		return errs
	}},
}

// replay runs trials of one scenario against h and returns the number of
// identities with more than one effect, with fewer than one, and the
// handler's errors.
func replay(t testing.TB, h handler, sc scenario, trials int) (doubles, lost, errs int) {
	ctx := context.Background()
	for trial := 0; trial < trials; trial++ {
		recs := []map[string]any{
			rec("record_id", fmt.Sprintf("t%d-a", trial), "amount", "1"),
			rec("record_id", fmt.Sprintf("t%d-b", trial), "amount", "1", "subject", fmt.Sprintf("s%d", trial%3)),
		}
		errs += sc(ctx, h, trial, recs)
	}
	eff, err := h.effects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for trial := 0; trial < trials; trial++ {
		for _, suffix := range []string{"a", "b"} {
			switch n := eff[fmt.Sprintf("t%d-%s", trial, suffix)]; {
			case n > 1:
				doubles++
			case n < 1:
				lost++
			}
		}
	}
	return doubles, lost, errs
}

func trialsFor(name string) int {
	if name == "concurrent" {
		return 200
	}
	return 50
}

// TestReplaySettleExactlyOnce: under each delivery scenario, settle gives
// every identity exactly one effect and loses none.
func TestReplaySettleExactlyOnce(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			s := settletest.NewStore(t, settle.Config{})
			doubles, lost, _ := replay(t, settleHandler{s}, sc.run, trialsFor(sc.name))
			if doubles != 0 || lost != 0 {
				t.Errorf("%s: %d identities settled twice, %d lost; want exactly one effect each", sc.name, doubles, lost)
			}
			checkInvariants(t, s.Pool())
		})
	}
}

// TestReplayCatchesCheckThenInsert runs a check-then-insert handler through
// the same concurrent scenario: the check must catch its double effects.
func TestReplayCatchesCheckThenInsert(t *testing.T) {
	t.Parallel()
	doubles, _, _ := replay(t, newStrawman(t, "check_then_act"), scenarios[3].run, 200)
	if doubles == 0 {
		t.Fatal("the concurrent scenario found no double effect in a check-then-insert handler: the test cannot fail")
	}
	t.Logf("check-then-insert: %d identities settled twice in 200 concurrent trials", doubles)
}
