package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/reconcile"
	"github.com/settlehq/settle/settle/schema"
)

// EdgeResult is one edge run: a `settle run` process driven over HTTP.
type EdgeResult struct {
	Binary string `json:"binary"`
	// Saturation: Clients closed-loop clients for its length.
	Saturation RunResult `json:"saturation"`
	// HalfRate: half the saturation rate offered open-loop.
	HalfRate RunResult        `json:"half_rate"`
	Clients  int              `json:"clients"`
	Answers  map[string]int64 `json:"answers"`
	Keys     int              `json:"keys"`
	Records  int              `json:"distinct_records"`
}

// edgeTenant and edgeToken are the one tenant of an edge run and its API
// token.
const (
	edgeTenant = "bench"
	edgeToken  = "bench-edge-token-0123456789abcdef"
)

// runEdge starts binary's `settle run` with its records API on loopback,
// over a fresh database the binary migrates and an in-process broker,
// measures requests/s with c.EdgeClients clients, then the latency at half
// that rate, then answers every key and checks the database: every key
// done with the answer its clients were given, and the exactly-once
// invariants (settle/reconcile).
func (c *Config) runEdge(ctx context.Context, binary, tag string) (*EdgeResult, error) {
	// This process is only the load generator here (the service is the
	// child settle run, under its own limit).
	defer liftMemoryLimit()()
	res := &EdgeResult{Binary: binary, Clients: c.EdgeClients}
	b, err := startBroker(ctx, c.BrokerArgv, filepath.Join(c.OutDir, "broker.log"))
	if err != nil {
		return nil, err
	}
	defer b.close()
	prefix := "edge" + tag + "-"
	if err := createTopics(ctx, b.addrs, 1, topics{prefix + "usage", prefix + "results", prefix + "dlq", prefix + "settlements"}); err != nil {
		return nil, err
	}
	db, err := newEmptyDatabase(ctx, c.ServerURL, "edge", c.Keep)
	if err != nil {
		return nil, err
	}
	defer db.drop()
	proc, err := startService(ctx, procArgs{binary: binary, logPath: filepath.Join(c.OutDir, "edge"+tag+".log"),
		databaseURL: db.url, brokers: b.addrs[0], prefix: prefix, token: edgeTenant + "=" + edgeToken, poolConns: c.PoolConns})
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = proc.stop()
		}
	}()
	load, err := newEdgeLoad(proc.apiURL, edgeTenant, edgeToken)
	if err != nil {
		return nil, err
	}
	// A short warm-up (connections, caches, the first accounts) is left
	// out of both figures.
	load.saturate(ctx, c.EdgeClients, time.Second, 1)

	m, err := startMeter(ctx, c.ServerURL, db.name)
	if err != nil {
		return nil, err
	}
	cpu0 := proc.cpu()
	rate, lats := load.saturate(ctx, c.EdgeClients, c.EdgeDuration, 2)
	res.Saturation = RunResult{Name: "edge-saturation" + tag}
	if err := m.stop(ctx, &res.Saturation, len(lats)); err != nil {
		return nil, err
	}
	res.Saturation.RecordsPerSec = rate
	res.Saturation.ServiceCPUPer1k = (proc.cpu() - cpu0).Seconds() / (float64(len(lats)) / 1000)
	res.Saturation.Latency = summarise(lats, 0)

	half := rate / 2
	if m, err = startMeter(ctx, c.ServerURL, db.name); err != nil {
		return nil, err
	}
	cpu0 = proc.cpu()
	lats = load.paced(ctx, c.EdgeClients, half, c.EdgeDuration, 3)
	res.HalfRate = RunResult{Name: "edge-half-rate" + tag}
	if err := m.stop(ctx, &res.HalfRate, len(lats)); err != nil {
		return nil, err
	}
	res.HalfRate.ServiceCPUPer1k = (proc.cpu() - cpu0).Seconds() / (float64(max(1, len(lats))) / 1000)
	res.HalfRate.Latency = summarise(lats, half)

	if err := load.finish(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	stopped = true
	if err := proc.stop(); err != nil {
		return nil, err
	}
	res.Answers, res.Keys, res.Records = load.statuses, len(load.keys), int(load.records)
	if len(load.problems) > 0 {
		return res, fmt.Errorf("edge answers broke the contract: %v", load.problems)
	}
	chk, err := c.checkEdge(ctx, db, load, prefix)
	res.HalfRate.Checks = &chk
	return res, err
}

// checkEdge checks an edge run's database once its process stopped. The
// database is first migrated to this build's schema (an older binary's
// database is an upgrade away), then: every key is done and stores the
// answer its clients were given, and the exactly-once invariants hold
// (every key's record delivered once, one identity per distinct record,
// one effect per identity, balances equal to their rows; reconcile clean).
func (c *Config) checkEdge(ctx context.Context, db *database, load *edgeLoad, prefix string) (Checks, error) {
	conn, err := pgx.Connect(ctx, db.url)
	if err != nil {
		return Checks{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := schema.Migrate(ctx, conn); err != nil {
		return Checks{}, fmt.Errorf("migrate the edge run's database to this build's schema: %w", err)
	}
	rows, err := conn.Query(ctx, mustSQL("edge_keys.sql"), edgeTenant)
	if err != nil {
		return Checks{}, fmt.Errorf("read the idempotency keys: %w", err)
	}
	answers := newAnswerCheck(load.keys)
	var key string
	var resp []byte
	if _, err := pgx.ForEachRow(rows, []any{&key, &resp}, func() error { answers.add(key, resp); return nil }); err != nil {
		return Checks{}, fmt.Errorf("read the idempotency keys: %w", err)
	}
	pool, err := db.pool(ctx, 4)
	if err != nil {
		return Checks{}, err
	}
	defer pool.Close()
	store, err := settle.Open(ctx, pool, settle.Config{SettlementsTopic: prefix + "settlements", ResultsTopic: prefix + "results", DeadLetterTopic: prefix + "dlq"})
	if err != nil {
		return Checks{}, err
	}
	chk, err := check(ctx, store, len(load.keys), load.records, nil)
	if bad := answers.bad(); len(bad) > 0 || answers.stored != len(load.keys) {
		chk.Violations = append(chk.Violations, fmt.Sprintf("every key done with the answer its clients got: %d keys sent, %d done, %d differ (%v)",
			len(load.keys), answers.stored, len(bad), bad[:min(5, len(bad))]))
	}
	rep, rerr := reconcile.Run(ctx, store, reconcile.Input{OutboxGrace: time.Hour, Group: prefix + "group"})
	switch {
	case rerr != nil:
		chk.Violations = append(chk.Violations, "reconcile: "+rerr.Error())
	case !rep.Clean():
		chk.Violations = append(chk.Violations, fmt.Sprintf("reconcile found %d differences, first %+v", len(rep.Findings), rep.Findings[0]))
	}
	if len(chk.Violations) > 0 {
		return chk, fmt.Errorf("exactly-once invariants violated: %v", chk.Violations)
	}
	return chk, err
}
