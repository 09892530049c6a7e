package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/money"
	gen "github.com/settlehq/settle/internal/workload"
)

// findings is what check saw: problems (each a broken invariant) and the
// figures the report quotes.
type findings struct {
	problems []string

	deliveries         int
	outcomes           map[string]int
	settlementsRaw     int // messages on the settlements topic
	settlementsUnique  int // distinct settlement_id
	settlementsRepeats int // raw - unique: republished by a relay that died before marking
	results            int
	kafkaOffsets       map[int32]int64
	pgOffsets          map[int32]int64
}

func (f *findings) bad(format string, args ...any) {
	if len(f.problems) < 200 { // enough to diagnose, not a flood
		f.problems = append(f.problems, fmt.Sprintf(format, args...))
	}
}

// check verifies the contract's invariants over the database of a finished
// run (no settle process running) and the broker's topics:
//   - every input record (coordinates) has exactly one delivery row, and
//     the outcomes add up to the workload model's (originals settled,
//     duplicates duplicate, conflicts quarantined);
//   - every identity ended as the model expects (settled), exactly once,
//     with exactly the one ledger row of the expected amount, and no
//     identity that was not in the input;
//   - the settlements topic deduplicated by settlement_id holds exactly one
//     message per settled identity that wrote ledger rows, with a gapless
//     per-account sequence; raw repeats are counted;
//   - every input record has a message on usage.results;
//   - no Kafka commit of the group is ahead of PostgreSQL's consumer_offsets;
//   - every cached balance (and held amount) equals the sum of its rows;
//   - the outbox is fully published.
func check(t *testing.T, pool *pgxpool.Pool, brokers []string, group string, w *workload) *findings {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := &findings{outcomes: map[string]int{}}

	// Offsets first: Kafka's commit is read before PostgreSQL's, which only
	// grows, so a live pipeline could not produce a false alarm either.
	f.kafkaOffsets = committed(ctx, t, brokers, group)
	f.pgOffsets = map[int32]int64{}
	rows, err := pool.Query(ctx, `SELECT partition, next_offset FROM consumer_offsets WHERE group_id = $1 AND topic = 'usage'`, group)
	if err != nil {
		t.Fatalf("read consumer_offsets: %v", err)
	}
	for rows.Next() {
		var p int32
		var o int64
		if err := rows.Scan(&p, &o); err != nil {
			t.Fatal(err)
		}
		f.pgOffsets[p] = o
	}
	rows.Close()
	for p, o := range f.kafkaOffsets {
		if o > f.pgOffsets[p] {
			f.bad("offsets: partition %d: kafka committed %d, ahead of postgres %d", p, o, f.pgOffsets[p])
		}
	}

	// Deliveries: exactly one per input record, none for anything else.
	seen := map[coord]bool{}
	rows, err = pool.Query(ctx, `SELECT partition, "offset", outcome FROM deliveries WHERE topic = 'usage'`)
	if err != nil {
		t.Fatalf("read deliveries: %v", err)
	}
	for rows.Next() {
		var c coord
		var outcome string
		if err := rows.Scan(&c.partition, &c.offset, &outcome); err != nil {
			t.Fatal(err)
		}
		if seen[c] {
			f.bad("deliveries: %d/%d has more than one row", c.partition, c.offset)
		}
		if !w.coords[c] {
			f.bad("deliveries: %d/%d is not an input record", c.partition, c.offset)
		}
		seen[c] = true
		f.deliveries++
		f.outcomes[outcome]++
	}
	rows.Close()
	missing := 0
	for c := range w.coords {
		if !seen[c] {
			if missing < 5 {
				f.bad("deliveries: input record %d/%d has no delivery row", c.partition, c.offset)
			}
			missing++
		}
	}
	if missing > 0 {
		f.bad("deliveries: %d of %d input records have no delivery row", missing, len(w.coords))
	}
	for outcome, want := range w.outcomes {
		if f.outcomes[outcome] != want {
			f.bad("outcomes: %d %s, want %d", f.outcomes[outcome], outcome, want)
		}
	}
	for outcome, n := range f.outcomes {
		if _, ok := w.outcomes[outcome]; !ok {
			f.bad("outcomes: %d unexpected %s", n, outcome)
		}
	}

	// One effect per identity.
	settled := map[string]bool{} // settlement ids of identities that wrote rows
	rows, err = pool.Query(ctx, `
		SELECT i.tenant_id, i.account_period, i.record_id, i.operation, i.outcome, coalesce(i.settlement_id, ''),
		       count(l.id), count(l.id) FILTER (WHERE l.bucket <> 'balance'), coalesce(sum(l.amount), 0)::text
		  FROM identities i LEFT JOIN ledger_entries l ON l.identity_id = i.id
		 GROUP BY i.tenant_id, i.id`)
	if err != nil {
		t.Fatalf("read identities: %v", err)
	}
	found := 0
	for rows.Next() {
		var tenant, period, record, op, outcome, sid, sum string
		var n, other int
		if err := rows.Scan(&tenant, &period, &record, &op, &outcome, &sid, &n, &other, &sum); err != nil {
			t.Fatal(err)
		}
		name := gen.Identity{Tenant: tenant, Period: period, RecordID: record, Operation: op}
		want, ok := w.effects[name]
		switch {
		case !ok:
			f.bad("identity %s: not in the input", name)
		case outcome != want.Outcome:
			f.bad("identity %s: outcome %s, want %s", name, outcome, want.Outcome)
		case n != 1 || other != 0:
			// The workload's usage and grants each write one balance row.
			f.bad("identity %s: %d ledger rows (%d not balance), want exactly one balance row", name, n, other)
		case money.MustParse(sum).Cmp(money.MustParse(want.Balance.String())) != 0:
			f.bad("identity %s: effect %s, want %s", name, sum, want.Balance)
		}
		if ok {
			found++
		}
		if n > 0 && sid != "" {
			settled[sid] = true
		}
	}
	rows.Close()
	if found != len(w.effects) {
		f.bad("identities: %d of the %d in the input are in the database", found, len(w.effects))
	}

	// Cached balances equal the sums of their rows.
	var drift int
	var example string
	err = pool.QueryRow(ctx, `
		WITH sums AS (
		  SELECT a.id, a.balance, a.held,
		         coalesce(sum(l.amount) FILTER (WHERE l.bucket = 'balance'), 0) AS rows_balance,
		         coalesce(sum(l.amount) FILTER (WHERE l.bucket = 'held'), 0) AS rows_held
		    FROM accounts a LEFT JOIN ledger_entries l ON l.account_id = a.id
		   GROUP BY a.tenant_id, a.id)
		SELECT count(*), coalesce(min(format('account %s: balance %s held %s, rows %s and %s', id, balance, held, rows_balance, rows_held)), '')
		  FROM sums WHERE balance <> rows_balance OR held <> rows_held`).Scan(&drift, &example)
	if err != nil {
		t.Fatalf("check balances: %v", err)
	}
	if drift > 0 {
		f.bad("balances: %d accounts differ from the sum of their rows, e.g. %s", drift, example)
	}

	var backlog int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox_queue`).Scan(&backlog); err != nil {
		t.Fatal(err)
	}
	if backlog > 0 {
		f.bad("outbox: %d rows never published", backlog)
	}

	// The settlements topic, deduplicated by settlement_id.
	onTopic := map[string]int{}
	seqs := map[string][]int64{} // per account key, distinct settlements' sequences
	for _, r := range readAll(ctx, t, brokers, "settlements") {
		f.settlementsRaw++
		sid := kafkatest.Header(r, "settlement_id")
		var body struct {
			SettlementID string `json:"settlement_id"`
			Sequence     int64  `json:"sequence"`
		}
		if err := json.Unmarshal(r.Value, &body); err != nil || sid == "" || body.SettlementID != sid {
			f.bad("settlements: message at %d/%d: header settlement_id %q, body %q (%v)", r.Partition, r.Offset, sid, body.SettlementID, err)
			continue
		}
		onTopic[sid]++
		if onTopic[sid] == 1 {
			seqs[string(r.Key)] = append(seqs[string(r.Key)], body.Sequence)
		}
	}
	f.settlementsUnique = len(onTopic)
	f.settlementsRepeats = f.settlementsRaw - f.settlementsUnique
	for sid := range onTopic {
		if !settled[sid] {
			f.bad("settlements: %s is not a settled identity with ledger rows", sid)
		}
	}
	unpublished := 0
	for sid := range settled {
		if onTopic[sid] == 0 {
			unpublished++
		}
	}
	if unpublished > 0 {
		f.bad("settlements: %d of %d settled identities have no message", unpublished, len(settled))
	}
	for key, s := range seqs {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		for i, q := range s {
			if q != int64(i+1) {
				f.bad("settlements: account %s: sequences %v are not 1..%d", key, s[:min(len(s), 10)], len(s))
				break
			}
		}
	}

	// One result (at least) per input record.
	resulted := map[coord]bool{}
	for _, r := range readAll(ctx, t, brokers, "usage.results") {
		f.results++
		var res struct {
			Source struct {
				Partition int32 `json:"partition"`
				Offset    int64 `json:"offset"`
			} `json:"source"`
		}
		if err := json.Unmarshal(r.Value, &res); err == nil {
			resulted[coord{res.Source.Partition, res.Source.Offset}] = true
		}
	}
	noResult := 0
	for c := range w.coords {
		if !resulted[c] {
			noResult++
		}
	}
	if noResult > 0 {
		f.bad("results: %d input records have no message on usage.results", noResult)
	}
	return f
}

// committed returns group's committed offsets of the usage topic.
func committed(ctx context.Context, t *testing.T, brokers []string, group string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets of group %s: %v", group, err)
	}
	out := map[int32]int64{}
	resps.Each(func(r kadm.OffsetResponse) {
		if r.Topic == "usage" && r.Err == nil && r.At >= 0 {
			out[r.Partition] = r.At
		}
	})
	return out
}

// readAll reads every record of topic up to its end offsets at the time of
// the call.
func readAll(ctx context.Context, t *testing.T, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	left := map[int32]int64{} // partition -> end offset not yet reached
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", topic, o.Partition, o.Err)
		}
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var out []*kgo.Record
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d records read, partitions not finished: %v", topic, len(out), left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok {
				out = append(out, r)
				if r.Offset+1 >= end {
					delete(left, r.Partition)
				}
			}
		})
	}
	return out
}

// waitSettled waits until n deliveries exist, or fails after timeout.
func waitDeliveries(t *testing.T, pool *pgxpool.Pool, n int, timeout time.Duration, alive func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := countDeliveries(t, pool)
		if got >= n {
			return
		}
		if err := alive(); err != nil {
			t.Fatalf("waiting for %d deliveries (have %d): %v", n, got, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %d deliveries (have %d)", timeout, n, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func countDeliveries(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM deliveries`).Scan(&n); err != nil {
		t.Fatalf("count deliveries: %v", err)
	}
	return n
}

func outboxBacklog(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_queue`).Scan(&n); err != nil {
		t.Fatalf("outbox backlog: %v", err)
	}
	return n
}
