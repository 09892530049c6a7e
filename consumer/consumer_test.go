package consumer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/relay"
	"github.com/settlehq/settle/relay/outbox"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// usage returns a valid usage record's JSON with fields overridden by kv
// pairs (a nil value deletes the field).
func usage(kv ...any) []byte {
	m := map[string]any{
		"tenant_id": "acme", "account_period": "2026-11", "record_id": "u-1", "kind": "usage",
		"subject": "cust-1", "amount": "40", "currency": "USD", "meter": "gpu_seconds",
		"quantity": "40", "unit": "s", "occurred_at": "2026-11-03T10:00:00Z", "finalization_version": 1,
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(m, kv[i].(string))
		} else {
			m[kv[i].(string)] = kv[i+1]
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func rec(partition int32, value []byte) *kgo.Record {
	return &kgo.Record{Topic: "usage", Partition: partition, Key: []byte("acme/cust-1"), Value: value,
		Headers: []kgo.RecordHeader{{Key: "origin", Value: []byte("test")}}}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func consumerConfig(t *testing.T, k *kafkatest.Cluster, group string) consumer.Config {
	return consumer.Config{
		Brokers: k.Brokers, Group: group,
		SessionTimeout: time.Second, RebalanceTimeout: 2 * time.Second,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		DrainTimeout: 2 * time.Second, Logger: testLogger(t),
	}
}

func runConsumer(t *testing.T, s *settle.Store, cfg consumer.Config) (*consumer.Consumer, func()) {
	t.Helper()
	c, err := consumer.New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, testnet.Background(t, c.Run)
}

func runRelay(t *testing.T, s *settle.Store, k *kafkatest.Cluster) (*relay.Relay, func()) {
	t.Helper()
	r, err := relay.New(outbox.New(s), relay.Config{Brokers: k.Brokers, StandbyInterval: 50 * time.Millisecond,
		BackoffMin: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return r, testnet.Background(t, r.Run)
}

func results(t *testing.T, k *kafkatest.Cluster, n int) map[string]message.Result {
	t.Helper()
	out := map[string]message.Result{}
	for _, r := range k.Read(t, "usage.results", n, 20*time.Second) {
		var res message.Result
		if err := json.Unmarshal(r.Value, &res); err != nil {
			t.Fatalf("result %s: %v", r.Value, err)
		}
		if res.Version != message.SchemaVersionOutput {
			t.Errorf("result version %d", res.Version)
		}
		out[fmt.Sprintf("%d/%d", res.Source.Partition, res.Source.Offset)] = res
	}
	if len(out) < n {
		t.Fatalf("results: got %d distinct input records, want %d", len(out), n)
	}
	return out
}

func count(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// checkOffsets asserts that no Kafka commit of group is ahead of the next
// offset PostgreSQL holds for it, and returns both.
func checkOffsets(t *testing.T, k *kafkatest.Cluster, s *settle.Store, group string) (kafka map[int32]int64, pg map[int32]int64) {
	t.Helper()
	kafka = k.Committed(t, group, "usage") // first: PostgreSQL's offsets only grow
	all, err := s.ConsumerOffsets(context.Background(), group)
	if err != nil {
		t.Errorf("read postgres offsets: %v", err) // not Fatal: called from a sampling goroutine
		return kafka, nil
	}
	pg = all["usage"]
	for p, o := range kafka {
		if o > pg[p] {
			t.Errorf("partition %d: kafka committed %d, ahead of postgres %d", p, o, pg[p])
		}
	}
	return kafka, pg
}

// TestPipelineEndToEnd settles records from a kfake topic through the
// consumer and the relay: one result per input record on usage.results,
// one message per settlement on settlements, dead letters with their
// original bytes, headers and reason on usage.dlq; poison records do not
// hold up the records behind them in their partition; and Kafka's commits
// never get ahead of PostgreSQL's offsets, sampled while it runs.
func TestPipelineEndToEnd(t *testing.T) {
	t.Parallel()
	testPipelineEndToEnd(t, settletest.NewStore(t, settle.Config{}))
}

// TestPipelineEndToEndPartitioned: the same pipeline, consumer, settling
// transaction and relay, on a database whose per-tenant tables are
// PARTITION BY HASH (tenant_id) (schema.Partition): the key rules of a
// database distributed by tenant. Dead letters (the empty tenant) and acme's rows
// land in different partitions.
func TestPipelineEndToEndPartitioned(t *testing.T) {
	t.Parallel()
	testPipelineEndToEnd(t, settletest.NewStoreOn(t, settletest.NewPartitionedDatabase(t), settle.Config{}))
}

func testPipelineEndToEnd(t *testing.T, s *settle.Store) {
	k := kafkatest.NewCluster(t, 3)
	grant := usage("record_id", "g-1", "kind", "grant", "amount", "100", "meter", nil, "quantity", nil, "unit", nil, "finalization_version", nil)
	oversize := usage("record_id", "big", "attributes", map[string]any{"pad": strings.Repeat("x", 70<<10)})
	k.Produce(t,
		rec(0, grant),   // 0/0 settled
		rec(0, usage()), // 0/1 u-1 (settled or duplicate)
		rec(0, []byte(`{"tenant_id": "acme", oops`)), // 0/2 invalid_json
		rec(0, oversize), // 0/3 too_large
		rec(0, usage("record_id", "u-2", "amount", 7)),         // 0/4 invalid_field: a JSON number
		rec(0, usage("record_id", "u-3")),                      // 0/5 settled behind the poison
		rec(1, usage()),                                        // 1/0 u-1 again (duplicate or settled)
		rec(1, usage("amount", "41")),                          // 1/1 conflict: quarantined
		rec(2, usage("record_id", "u-9", "subject", "cust-2")), // 2/0 settled
	)
	c, stopConsumer := runConsumer(t, s, consumerConfig(t, k, "e2e"))
	_, stopRelay := runRelay(t, s, k)

	// Sample the offset invariant while the pipeline runs.
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			checkOffsets(t, k, s, "e2e")
			time.Sleep(50 * time.Millisecond)
		}
	}()

	rs := results(t, k, 9)
	want := map[string]string{
		"0/0": "settled", "0/2": "dead_lettered:invalid_json", "0/3": "dead_lettered:too_large",
		"0/4": "dead_lettered:invalid_field", "0/5": "settled", "1/1": "quarantined:fingerprint_mismatch", "2/0": "settled",
	}
	for at, w := range want {
		r := rs[at]
		if got := strings.TrimSuffix(string(r.Outcome)+":"+r.Reason, ":"); got != w {
			t.Errorf("result %s = %s, want %s (%+v)", at, got, w, r)
		}
	}
	// The two deliveries of u-1 are on different partitions, settled
	// concurrently: whichever comes first settles, the other replays it.
	a, b := rs["0/1"], rs["1/0"]
	if got := []message.Outcome{a.Outcome, b.Outcome}; !(got[0] == message.OutcomeSettled && got[1] == message.OutcomeDuplicate ||
		got[1] == message.OutcomeSettled && got[0] == message.OutcomeDuplicate) {
		t.Errorf("u-1 deliveries = %v, want one settled and one duplicate", got)
	}
	dup := a
	if b.Outcome == message.OutcomeDuplicate {
		dup = b
	}
	if !dup.Replayed || len(dup.Response) == 0 {
		t.Errorf("duplicate result must replay the stored response: %+v", dup)
	}

	dlq := k.Read(t, "usage.dlq", 3, 20*time.Second)
	if len(dlq) != 3 {
		t.Fatalf("usage.dlq has %d messages, want 3", len(dlq))
	}
	wantDLQ := map[string]string{"2": "invalid_json", "3": "too_large", "4": "invalid_field"}
	for _, m := range dlq {
		off := kafkatest.Header(m, "dlq_source_offset")
		if got := kafkatest.Header(m, "dlq_reason"); got != wantDLQ[off] {
			t.Errorf("dead letter of offset %s: reason %q, want %q", off, got, wantDLQ[off])
		}
		if kafkatest.Header(m, "origin") != "test" || kafkatest.Header(m, "dlq_source_topic") != "usage" {
			t.Errorf("dead letter of offset %s lost its headers or source: %v", off, m.Headers)
		}
		if off == "3" && !bytes.Equal(m.Value, oversize) {
			t.Errorf("dead letter of offset 3 does not carry the original bytes")
		}
	}

	sets := k.Read(t, "settlements", 4, 20*time.Second)
	ids := map[string]bool{}
	for _, m := range sets {
		ids[kafkatest.Header(m, "settlement_id")] = true
	}
	if len(sets) != 4 || len(ids) != 4 || ids[""] {
		t.Errorf("settlements: %d messages, %d distinct settlement ids, want 4 and 4", len(sets), len(ids))
	}
	testnet.WaitFor(t, "consumer ready", 5*time.Second, c.Ready)

	stopSampling()
	<-sampled
	stopConsumer()
	stopRelay()
	kafka, pg := checkOffsets(t, k, s, "e2e")
	for p, want := range map[int32]int64{0: 6, 1: 2, 2: 1} {
		if kafka[p] != want || pg[p] != want {
			t.Errorf("partition %d: kafka committed %d, postgres %d, want both %d", p, kafka[p], pg[p], want)
		}
	}
	if c.Ready() {
		t.Errorf("a stopped consumer must not be ready")
	}
}

// TestRecordFailingInTheDatabaseIsIsolated: a record the decoder accepts
// but the database refuses (a trigger, installed for the test, raises an
// error on its identity row) fails its whole batch. The consumer bisects to
// it, settles the records around it, retries it a bounded number of times,
// then dead-letters it transient_exhausted; the partition moves on.
func TestRecordFailingInTheDatabaseIsIsolated(t *testing.T) {
	t.Parallel()
	// On three partitions a poll is small enough to settle in one lane, so
	// the bisection crosses partitions and each partition's progress and
	// commit must still come out right.
	for _, partitions := range []int32{1, 3} {
		t.Run(fmt.Sprintf("partitions=%d", partitions), func(t *testing.T) {
			t.Parallel()
			recordFailingInTheDatabaseIsIsolated(t, partitions)
		})
	}
}

func recordFailingInTheDatabaseIsIsolated(t *testing.T, partitions int32) {
	k := kafkatest.NewCluster(t, partitions)
	s := settletest.NewStore(t, settle.Config{})
	if _, err := s.Pool().Exec(context.Background(), `
		CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.record_id = 'poison' THEN RAISE EXCEPTION 'refused by the test trigger'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_poison BEFORE INSERT ON identities FOR EACH ROW EXECUTE FUNCTION refuse_poison();`); err != nil {
		t.Fatal(err)
	}
	poisoned := partitions - 1
	var recs []*kgo.Record
	for p := range partitions {
		for i := range 8 {
			id := fmt.Sprintf("u-%d-%d", p, i)
			if p == poisoned && i == 5 {
				id = "poison"
			}
			recs = append(recs, rec(p, usage("record_id", id)))
		}
	}
	k.Produce(t, recs...)
	cfg := consumerConfig(t, k, "poison")
	cfg.RecordAttemptsMax = 3
	_, stop := runConsumer(t, s, cfg)
	runRelay(t, s, k)
	rs := results(t, k, len(recs))
	for p := range partitions {
		for i := range 8 {
			r := rs[fmt.Sprintf("%d/%d", p, i)]
			want := "settled"
			if p == poisoned && i == 5 {
				want = "dead_lettered:transient_exhausted"
			}
			if got := strings.TrimSuffix(string(r.Outcome)+":"+r.Reason, ":"); got != want {
				t.Errorf("record %d/%d = %s (%s), want %s", p, i, got, r.Error, want)
			}
		}
	}
	if e := rs[fmt.Sprintf("%d/5", poisoned)].Error; !strings.Contains(e, "refused by the test trigger") {
		t.Errorf("dead letter error %q does not carry the last failure", e)
	}
	dlq := k.Read(t, "usage.dlq", 1, 20*time.Second)
	if len(dlq) != 1 || kafkatest.Header(dlq[0], "dlq_attempts") != "3" || kafkatest.Header(dlq[0], "dlq_reason") != "transient_exhausted" {
		t.Errorf("dead letters: %d, want 1 with dlq_reason transient_exhausted and dlq_attempts 3", len(dlq))
	}
	stop()
	kafka, pg := checkOffsets(t, k, s, "poison")
	for p := range partitions {
		if kafka[p] != 8 || pg[p] != 8 {
			t.Errorf("partition %d: kafka committed %d, postgres holds %d, want 8 and 8", p, kafka[p], pg[p])
		}
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM identities`); n != len(recs)-1 {
		t.Errorf("%d identities, want %d (one per record but the dead letter)", n, len(recs)-1)
	}
	// The point of the three-partition run: some transaction (one now()
	// for all its identities) settled records of more than one partition.
	shared := count(t, s.Pool(), `SELECT count(*) FROM (SELECT committed_at FROM identities
		GROUP BY committed_at HAVING count(DISTINCT partition) > 1) x`)
	if partitions > 1 && shared == 0 {
		t.Errorf("no transaction settled records of two partitions: the poll was not settled in one lane")
	}
}

// TestRestoredDatabaseIsReadAgain: the database is restored from a backup
// taken when it had settled 3 records; Kafka's commit says 6. A consumer
// on the restored database reads the partition again from 3, so the
// records that the restore lost are settled again, not skipped.
func TestRestoredDatabaseIsReadAgain(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 1)
	dbURL := settletest.NewDatabase(t)
	cfg := consumerConfig(t, k, "restore")

	phase := func(url string, produce []int, want int) *settle.Store {
		t.Helper()
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		s := settletest.StoreOn(t, pool, settle.Config{})
		var recs []*kgo.Record
		for _, i := range produce {
			recs = append(recs, rec(0, usage("record_id", fmt.Sprintf("u-%d", i))))
		}
		if len(recs) > 0 {
			k.Produce(t, recs...)
		}
		_, stop := runConsumer(t, s, cfg)
		testnet.WaitFor(t, fmt.Sprintf("%d deliveries", want), 20*time.Second, func() bool {
			return count(t, pool, `SELECT count(*) FROM deliveries`) == want
		})
		stop()
		return s
	}
	s := phase(dbURL, []int{0, 1, 2}, 3)
	s.Pool().Close()
	backup := cloneDatabase(t, dbURL) // the backup, taken at offset 3
	s = phase(dbURL, []int{3, 4, 5}, 6)
	if kafka, _ := checkOffsets(t, k, s, "restore"); kafka[0] != 6 {
		t.Fatalf("kafka committed %d, want 6", kafka[0])
	}
	s.Pool().Close()

	restored := phase(backup, nil, 6) // read again from 3, not from Kafka's 6
	kafka, pg := checkOffsets(t, k, restored, "restore")
	if kafka[0] != 6 || pg[0] != 6 {
		t.Errorf("after the restore: kafka %d, postgres %d, want 6 and 6", kafka[0], pg[0])
	}
	if n := count(t, restored.Pool(), `SELECT count(*) FROM identities WHERE outcome = 'settled'`); n != 6 {
		t.Errorf("restored database has %d settled identities, want 6", n)
	}
	restored.Pool().Close()
}

// cloneDatabase copies the database at url (no one may be connected to it)
// into a new one, dropped at cleanup, and returns its URL: a backup.
func cloneDatabase(t *testing.T, src string) string {
	t.Helper()
	u, err := url.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	clone := name + "_bak"
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, settletest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+clone+` TEMPLATE `+name); err != nil {
		t.Fatalf("clone database: %v", err)
	}
	t.Cleanup(func() {
		admin, err := pgx.Connect(context.Background(), settletest.ServerURL())
		if err == nil {
			_, _ = admin.Exec(context.Background(), `DROP DATABASE IF EXISTS `+clone+` WITH (FORCE)`)
			admin.Close(context.Background())
		}
	})
	return settletest.DatabaseURL(clone)
}

// TestDatabaseOutagePauses: with PostgreSQL unreachable (a TCP proxy in
// front of it is cut), the consumer pauses, reports not ready and
// dead-letters nothing; when the proxy is restored it settles everything.
func TestDatabaseOutagePauses(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 1)
	u, err := url.Parse(settletest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	// In front of the test server, wherever SETTLE_TEST_DATABASE_URL puts it.
	px := testnet.NewProxy(t, u.Host)
	direct, err := pgxpool.New(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	u.Host = px.Addr()
	pcfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	pcfg.ConnConfig.ConnectTimeout = time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := settletest.StoreOn(t, pool, settle.Config{})

	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, rec(0, usage("record_id", fmt.Sprintf("u-%d", i))))
	}
	k.Produce(t, recs...)
	px.Cut()
	c, stop := runConsumer(t, s, consumerConfig(t, k, "outage"))
	time.Sleep(2 * time.Second)
	if c.Ready() {
		t.Errorf("ready during a database outage")
	}
	if !strings.Contains(c.NotReadyReason(), "database") {
		t.Errorf("not-ready reason %q does not name the database", c.NotReadyReason())
	}
	if n := count(t, direct, `SELECT count(*) FROM deliveries`); n != 0 {
		t.Errorf("%d deliveries recorded during the outage", n)
	}
	px.Restore()
	rs := results(t, k, 5)
	for at, r := range rs {
		if r.Outcome != message.OutcomeSettled {
			t.Errorf("record %s = %s %s, want settled", at, r.Outcome, r.Reason)
		}
	}
	testnet.WaitFor(t, "ready after the outage", 10*time.Second, c.Ready)
	if n := count(t, direct, `SELECT count(*) FROM dead_letters`); n != 0 {
		t.Errorf("%d dead letters after an outage, want 0", n)
	}
	stop()
	checkOffsets(t, k, s, "outage")
}

// TestRebalanceDoesNotWaitForTheWholePoll: a member holding a poll of
// thousands of records yields to a rebalance after the batch in hand
// instead of settling them all first (on a loaded machine that outlasts
// the rebalance timeout and stalls the whole group). A second member joins
// while the first is early in a poll of every record: it must be assigned
// while most of them are still unsettled, and every record must still end
// in exactly one delivery, with Kafka's commits never ahead of PostgreSQL.
func TestRebalanceDoesNotWaitForTheWholePoll(t *testing.T) {
	t.Parallel()
	const perPartition = 4000
	k := kafkatest.NewCluster(t, 2)
	s := settletest.NewStore(t, settle.Config{BatchRecordsMax: 20})
	var recs []*kgo.Record
	for p := range int32(2) {
		for i := range perPartition {
			recs = append(recs, rec(p, usage("record_id", fmt.Sprintf("u-%d-%d", p, i))))
		}
	}
	k.Produce(t, recs...)
	const total = 2 * perPartition

	cfg := consumerConfig(t, k, "yield")
	cfg.PollRecordsMax = total // the whole topic in one poll
	_, stopFirst := runConsumer(t, s, cfg)
	deliveries := func() int { return count(t, s.Pool(), `SELECT count(*) FROM deliveries`) }
	testnet.WaitFor(t, "the first member to settle its first batches", 20*time.Second, func() bool { return deliveries() >= 100 })

	second, stopSecond := runConsumer(t, s, cfg)
	testnet.WaitFor(t, "the second member to be assigned", 20*time.Second, second.Ready)
	if n := deliveries(); n > total/2 {
		t.Errorf("the second member was assigned only after the first member had settled %d of the %d records of its poll", n, total)
	} else {
		t.Logf("second member assigned at %d of %d deliveries", n, total)
	}

	testnet.WaitFor(t, "every record delivered", time.Minute, func() bool { return deliveries() >= total })
	stopSecond()
	stopFirst()
	if n := count(t, s.Pool(), `SELECT count(DISTINCT (partition, "offset")) FROM deliveries`); n != total || deliveries() != total {
		t.Errorf("deliveries: %d rows for %d distinct records, want %d of each", deliveries(), n, total)
	}
	if n := count(t, s.Pool(), `SELECT count(*) FROM ledger_entries`); n != total {
		t.Errorf("ledger rows = %d, want one per record (%d)", n, total)
	}
	checkOffsets(t, k, s, "yield")
}
