package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/pgcluster"
	"github.com/settlehq/settle/service"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/schema"
)

// devCmd is the sandbox: everything settle needs, in one process, with
// sample traffic, on loopback.
type devCmd struct {
	KafkaAddr   string `name:"kafka-addr" env:"SETTLE_DEV_KAFKA_ADDR" default:"127.0.0.1:9092" help:"Loopback address of the embedded Kafka broker."`
	DatabaseURL string `name:"database-url" env:"SETTLE_DATABASE_URL,DATABASE_URL" default:"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable" help:"PostgreSQL server to use; dev creates database --database on it. When none answers, dev starts a private throwaway server if PostgreSQL is installed."`
	Database    string `name:"database" env:"SETTLE_DEV_DATABASE" default:"settle_dev" help:"The sandbox's database, created empty on each start (the embedded broker starts empty too). Dev drops only one it created and no other dev uses."`
	NoSample    bool   `name:"no-sample" env:"SETTLE_DEV_NO_SAMPLE" help:"Do not produce sample traffic."`
	adminFlags  `embed:""`
}

// Run starts the sandbox and runs until Ctrl-C.
func (c *devCmd) Run(a *app) error {
	admin, err := c.adminFlags.settings()
	if err != nil {
		return err
	}
	if admin.insecure {
		warnAdminInsecure(a, c.AdminAddr)
	}
	host, portText, err := net.SplitHostPort(c.KafkaAddr)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil || (host != "127.0.0.1" && host != "localhost") {
		return usageError{fmt.Sprintf("--kafka-addr %q: want 127.0.0.1:PORT (the embedded broker listens on loopback only)", c.KafkaAddr)}
	}
	// Every port is checked before the database is touched: a second
	// sandbox that stops on a taken port has changed nothing. (The service
	// binds the admin port again below; only a race can take it between.)
	probe, err := net.Listen("tcp", c.AdminAddr)
	if err != nil {
		return fmt.Errorf("admin listener on %s: %w (is another settle dev running? choose another with --admin-addr)", c.AdminAddr, err)
	}
	_ = probe.Close() // a probe: the service binds the port for good
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port),
		kfake.SeedTopics(6, message.TopicUsage), kfake.SeedTopics(1, message.TopicResults, message.TopicDeadLetters, message.TopicSettlements))
	if err != nil {
		return fmt.Errorf("start the embedded Kafka broker on %s: %w (is the port taken? use --kafka-addr)", c.KafkaAddr, err)
	}
	defer broker.Close()
	brokers := []string{c.KafkaAddr}
	fmt.Fprintf(a.stdout, "kafka:      embedded broker on %s (topics usage[6], usage.results, usage.dlq, settlements)\n", c.KafkaAddr)

	server, cleanup, err := c.postgres(a)
	if err != nil {
		return err
	}
	defer cleanup()
	sandbox, err := c.claimDatabase(a.ctx, server)
	if err != nil {
		return err
	}
	defer sandbox.Close(a.ctx)
	dbCfg := sandbox.cfg
	if sandbox.fresh {
		fmt.Fprintf(a.stdout, "postgresql: %s (created empty)\n", databaseURL(dbCfg))
	} else {
		fmt.Fprintf(a.stdout, "postgresql: %s (settle dev's own: dropped and created again empty)\n", databaseURL(dbCfg))
	}
	conn, err := pgx.ConnectConfig(a.ctx, dbCfg.Copy())
	if err != nil {
		return err
	}
	_, err = schema.Migrate(a.ctx, conn)
	conn.Close(a.ctx)
	if err != nil {
		return err
	}
	poolCfg, _ := pgxpool.ParseConfig("")
	poolCfg.ConnConfig = dbCfg
	pool, err := pgxpool.NewWithConfig(a.ctx, poolCfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	topics := topicFlags{Topic: message.TopicUsage, ResultsTopic: message.TopicResults, SettlementsTopic: message.TopicSettlements, DeadLetterTopic: message.TopicDeadLetters}
	store, err := settle.Open(a.ctx, pool, settleFlags{}.config(topics))
	if err != nil {
		return err
	}
	svc := serviceFlags{adminFlags: c.adminFlags, admin: admin, Group: "settle-dev", ShutdownTimeout: 15 * time.Second,
		SessionTimeout: 10 * time.Second, PollRecordsMax: 10_000, RecordAttempts: 5, BackoffMax: 5 * time.Second}
	cfg, err := svc.config(a, store, brokers, topics)
	if err != nil {
		return err
	}
	// The analysts' page reads over a pool of its own, as under settle run
	// (its --read-pool-max-conns default), so the page's readers never
	// take the connections the sample settles over.
	readCfg := poolCfg.Copy()
	readCfg.MaxConns = 4
	if cfg.ReadPool, err = pgxpool.NewWithConfig(a.ctx, readCfg); err != nil {
		return err
	}
	defer cfg.ReadPool.Close()
	// The sandbox sweeps as the service does: expired holds are released,
	// orphans and operations whose target settled are handled.
	cfg.SweepInterval = service.SweepIntervalDefault
	// Built before it runs: the admin listener is bound, or its port
	// reported taken, before the sample and the analyst page's address are
	// printed.
	s, err := service.New(cfg)
	if err != nil {
		return serviceErr(err)
	}
	done := make(chan error, 1)
	go func() { done <- serviceErr(s.Run(a.ctx)) }()

	records := sampleTraffic(time.Now())
	samplePath, err := writeSample(c.Database, records)
	if err != nil {
		return fmt.Errorf("write the sample traffic: %w", err)
	}
	defer func() { _ = os.Remove(samplePath) }()
	if !c.NoSample {
		if err := c.sample(a, brokers, records, samplePath); err != nil {
			a.log.Warn("sample traffic", "err", err)
		}
	}
	c.nextSteps(a, databaseURL(dbCfg), samplePath)
	return <-done
}

// postgres finds a server: the one at --database-url, else a private
// throwaway cluster when the server programs are installed.
func (c *devCmd) postgres(a *app) (*pgx.ConnConfig, func(), error) {
	cfg, err := pgx.ParseConfig(c.DatabaseURL)
	if err != nil {
		return nil, nil, usageError{fmt.Sprintf("--database-url: %v", err)}
	}
	ctx, cancel := context.WithTimeout(a.ctx, 3*time.Second)
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	cancel()
	if err == nil {
		conn.Close(a.ctx)
		return cfg, func() {}, nil
	}
	reachErr := err
	if _, err := pgcluster.FindBinaries(); err != nil {
		if errors.Is(err, pgcluster.ErrBinariesNotFound) {
			return nil, nil, fmt.Errorf("no PostgreSQL answers at %s (%v), and no PostgreSQL server programs are installed to start a private one: %w; "+
				"or point --database-url / DATABASE_URL at a running server", redact(c.DatabaseURL), reachErr, err)
		}
		return nil, nil, err
	}
	fmt.Fprintf(a.stdout, "postgresql: none answers at %s; starting a private throwaway server...\n", redact(c.DatabaseURL))
	cl, err := pgcluster.Start(a.ctx, pgcluster.Options{})
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		if err := cl.Stop(); err != nil {
			a.log.Warn("stop the private PostgreSQL", "err", err)
		}
	}
	fmt.Fprintf(a.stdout, "postgresql: private server in %s on a unix socket (removed on exit)\n", cl.Dir())
	cfg, err = pgx.ParseConfig(cl.DSN("postgres"))
	if err != nil {
		stop()
		return nil, nil, err
	}
	return cfg, stop, nil
}

// writeSample writes the sample traffic for the hint that sends it again
// to a file of this run's own (a fixed name in the shared temporary
// directory was another sandbox's sample, of other times: conflicts, not
// duplicates; and a link planted there was followed), removed on exit.
func writeSample(database string, records []sampleRecord) (string, error) {
	f, err := os.CreateTemp("", "settle-dev-"+database+"-sample-*.jsonl")
	if err != nil {
		return "", err
	}
	for _, r := range records {
		if _, err := fmt.Fprintln(f, r.value); err != nil {
			_ = f.Close()
			return "", err
		}
	}
	return f.Name(), f.Close()
}

func validDatabaseName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// sample produces the sample traffic, waits for the pipeline to handle it,
// and prints one line per sample record with its outcome, read from the
// results topic as a producer would read it.
func (c *devCmd) sample(a *app, brokers []string, records []sampleRecord, path string) error {
	lines := make([]string, len(records))
	for i, r := range records {
		lines[i] = r.value
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kafkaLogger(a))
	if err != nil {
		return err
	}
	var mu sync.Mutex
	lineAt := map[message.Coordinates]int{} // where each sample line landed
	n, err := produceLines(a.ctx, cl, "usage", strings.NewReader(strings.Join(lines, "\n")), produceOptions{LineBytesMax: 1 << 20,
		Acked: func(line int, r *kgo.Record, err error) {
			if err == nil {
				mu.Lock()
				lineAt[message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}] = line
				mu.Unlock()
			}
		}})
	cl.Close()
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "sample:     produced %d records to usage (also in %s)\n", n.published.Load(), path)

	results, err := c.sampleResults(a, brokers, lineAt, len(records))
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "\nthe sample, record by record (outcomes as published on usage.results):")
	counts := map[message.Outcome]int{}
	for i, r := range records {
		res, ok := results[i+1]
		outcome := "no result yet"
		if ok {
			counts[res.Outcome]++
			outcome = string(res.Outcome)
			if res.Reason != "" {
				outcome += " " + res.Reason
			}
			if res.CaseID != 0 {
				outcome += fmt.Sprintf(" (case %d)", res.CaseID)
			}
		}
		fmt.Fprintf(a.stdout, "  %2d  %-46s -> %s\n", i+1, r.note, outcome)
	}
	var sum []string
	for _, o := range []message.Outcome{message.OutcomeSettled, message.OutcomeDuplicate, message.OutcomeQuarantined, message.OutcomeWaiting, message.OutcomeRefused, message.OutcomeDeadLettered} {
		if counts[o] > 0 {
			sum = append(sum, fmt.Sprintf("%d %s", counts[o], o))
		}
	}
	fmt.Fprintf(a.stdout, "  %d records: %s\n", len(records), strings.Join(sum, ", "))
	return nil
}

// sampleResults reads usage.results until every sample line has a final
// result (a waiting record's final result follows its first) and returns
// them by line number.
func (c *devCmd) sampleResults(a *app, brokers []string, lineAt map[message.Coordinates]int, want int) (map[int]message.Result, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kafkaLogger(a),
		kgo.ConsumeTopics(message.TopicResults), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := map[int]message.Result{}
	final := func() bool {
		if len(out) < want {
			return false
		}
		for _, r := range out {
			if r.Outcome == message.OutcomeWaiting {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(time.Minute)
	for !final() {
		if time.Now().After(deadline) {
			return out, fmt.Errorf("the pipeline gave %d of %d sample records a result within a minute; see the log above", len(out), want)
		}
		pctx, cancel := context.WithTimeout(a.ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if a.ctx.Err() != nil {
			return out, a.ctx.Err()
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			var r message.Result
			if json.Unmarshal(rec.Value, &r) != nil {
				return
			}
			if line, ok := lineAt[r.Source]; ok {
				out[line] = r
			}
		})
	}
	return out, nil
}

// buildCommand is the README's build command; the commands dev suggests
// call the binary it writes (e2e's TestFreshUser keeps them in step).
const (
	buildCommand = "go build -o bin/settle ./cmd/settle"
	builtBinary  = "bin/settle"
)

// databaseURL is the sandbox database's address as a URL, the form the
// README's walkthrough exports (a socket directory goes in ?host=).
func databaseURL(cfg *pgx.ConnConfig) string {
	u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Path: "/" + cfg.Database}
	if strings.HasPrefix(cfg.Host, "/") {
		u.RawQuery = url.Values{"host": {cfg.Host}, "port": {strconv.Itoa(int(cfg.Port))}}.Encode()
	} else {
		u.Host = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	}
	return u.String()
}

func (c *devCmd) nextSteps(a *app, dbURL, samplePath string) {
	b := c.KafkaAddr
	fmt.Fprintf(a.stdout, `
analyst:    http://%[5]s/  (conflict queue, cases, explain; JSON: /api/cases, /api/overview, /api/dlq)

try next, in another terminal (Ctrl-C here stops everything):
  %[7]s                 # once: the binary the commands below call
  export DATABASE_URL='%[6]s'
  %[8]s conflicts list
  %[8]s explain acme %[2]s u-2
  %[8]s produce --brokers %[1]s --publish-invalid %[4]s   # the sample again: duplicates
  echo '{"tenant_id":"acme","account_period":"%[2]s","record_id":"mine-1","kind":"grant","subject":"cust-9","amount":"10","currency":"USD","occurred_at":"%[3]s"}' \
    | %[8]s produce --brokers %[1]s                    # a record of your own
  curl -s http://%[5]s/readyz
  psql "$DATABASE_URL" -c 'SELECT outcome, reason, count(*) FROM deliveries GROUP BY 1, 2'
the topics, with kcat (apt-get install kcat):
  kcat -b %[1]s -C -t settlements -o beginning -e -J      # what finance reads
  kcat -b %[1]s -C -t usage.results -o beginning -e       # one result per input record
  kcat -b %[1]s -C -t usage.dlq -o beginning -e -J        # dead letters, with dlq_* headers
`, b, time.Now().UTC().Format("2006-01"), time.Now().UTC().Format(time.RFC3339), samplePath,
		c.AdminAddr, dbURL, buildCommand, builtBinary)
}

// sampleRecord is one line of the sample traffic and what it is meant to show.
type sampleRecord struct{ value, note string }

// sampleTraffic is a small day of usage: grants, charges, a duplicate
// under other coordinates, a conflict, a correction, a refund and its
// reclaim, holds with a capture and a release, and records that are not
// valid.
func sampleTraffic(now time.Time) []sampleRecord {
	period := now.UTC().Format("2006-01")
	at := now.UTC().Add(-time.Hour).Format(time.RFC3339)
	expires := now.UTC().Add(time.Hour).Format(time.RFC3339)
	r := func(fields string) string {
		return `{"tenant_id":"acme","account_period":"` + period + `","occurred_at":"` + at + `",` + fields + `}`
	}
	use := func(id, subject, amount string) string {
		return r(`"record_id":"` + id + `","kind":"usage","subject":"` + subject + `","amount":"` + amount +
			`","currency":"USD","meter":"gpu_seconds","quantity":"` + amount + `","unit":"s","finalization_version":1`)
	}
	return []sampleRecord{
		{r(`"record_id":"grant-1","kind":"grant","subject":"cust-1","amount":"100","currency":"USD"`), "grant-1: grant 100 USD to cust-1"},
		{r(`"record_id":"grant-2","kind":"grant","subject":"cust-2","amount":"50","currency":"USD"`), "grant-2: grant 50 USD to cust-2"},
		{use("u-1", "cust-1", "12.5"), "u-1: usage 12.5 by cust-1"},
		{use("u-2", "cust-1", "7"), "u-2: usage 7 by cust-1"},
		{use("u-3", "cust-2", "20"), "u-3: usage 20 by cust-2"},
		{use("u-1", "cust-1", "12.50"), "u-1 again, same payload (12.50 = 12.5)"},
		{use("u-2", "cust-1", "8"), "u-2 again with another amount (8, not 7)"},
		{r(`"record_id":"c-1","kind":"correction","subject":"cust-1","amount":"10","currency":"USD","meter":"gpu_seconds","quantity":"10","unit":"s","finalization_version":2,"corrects":"u-1"`), "c-1: correction of u-1 to 10"},
		{r(`"record_id":"u-3","kind":"refund","subject":"cust-2"`), "refund of u-3"},
		{r(`"record_id":"u-3","kind":"reclaim","subject":"cust-2"`), "reclaim of u-3's refund"},
		{r(`"record_id":"h-1","kind":"hold","subject":"cust-1","amount":"30","currency":"USD","expires_at":"` + expires + `"`), "h-1: hold 30 on cust-1"},
		{r(`"record_id":"u-4","kind":"usage","subject":"cust-1","amount":"25","currency":"USD","meter":"gpu_seconds","quantity":"25","unit":"s","finalization_version":1,"hold_id":"h-1"`), "u-4: usage 25 captured from hold h-1"},
		{r(`"record_id":"h-2","kind":"hold","subject":"cust-2","amount":"5","currency":"USD"`), "h-2: hold 5 on cust-2"},
		{r(`"record_id":"h-2","kind":"hold_release","subject":"cust-2"`), "release of hold h-2"},
		{`{"tenant_id":"acme","subject":"cust-1", this is not JSON`, "a line that is not JSON"},
		{r(`"record_id":"u-5","kind":"usage","subject":"cust-1","amount":12,"currency":"USD"`), "u-5: amount as a JSON number, not a string"},
	}
}
