package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/relay"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/schema"
	"github.com/settlehq/settle/telemetry"
)

// runCmd is the service.
type runCmd struct {
	databaseFlags  `embed:""`
	kafkaFlags     `embed:""`
	topicFlags     `embed:""`
	settleFlags    `embed:""`
	serviceFlags   `embed:""`
	telemetryFlags `embed:""`
	edgeFlags      `embed:""`

	OwnerURL string `name:"owner-url" env:"SETTLE_OWNER_URL" help:"Schema owner's URL: migrate before starting (else a schema behind is refused)."`
}

// serviceFlags configure the long-running pipeline.
type serviceFlags struct {
	adminFlags       `embed:""`
	Group            string        `name:"group" env:"SETTLE_GROUP" default:"settle" help:"Kafka consumer group."`
	ShutdownTimeout  time.Duration `name:"shutdown-timeout" hidden:"" env:"SETTLE_SHUTDOWN_TIMEOUT" default:"30s" help:"Longest a stop may take: finish the batch, commit, leave the group, flush the outbox."`
	SessionTimeout   time.Duration `name:"session-timeout" hidden:"" env:"SETTLE_SESSION_TIMEOUT" default:"45s" help:"Consumer group session timeout."`
	RebalanceTimeout time.Duration `name:"rebalance-timeout" hidden:"" env:"SETTLE_REBALANCE_TIMEOUT" default:"60s" help:"How long the group waits for members to rejoin during a rebalance; a killed member stalls the group this long."`
	PollRecordsMax   int           `name:"poll-records-max" hidden:"" env:"SETTLE_POLL_RECORDS_MAX" default:"50000" help:"Most records taken per poll across partitions; a poll is settled (each partition in order, the partitions in parallel) before the offsets are committed."`
	RecordAttempts   int           `name:"record-attempts-max" hidden:"" env:"SETTLE_RECORD_ATTEMPTS_MAX" default:"5" help:"Attempts of a record that fails on its own before it is dead-lettered transient_exhausted."`
	BackoffMax       time.Duration `name:"backoff-max" hidden:"" env:"SETTLE_BACKOFF_MAX" default:"10s" help:"Longest wait between retries during an outage."`

	// Set by the command before pipeline(), not flags: the checked admin
	// flags, the brokers' TLS/SASL options and the process's telemetry
	// (nil = a default one).
	admin     adminSettings
	kafkaOpts []kgoOpt
	tel       *telemetry.Telemetry
}

// Run runs the service until SIGINT or SIGTERM.
func (c *runCmd) Run(a *app) error {
	err := c.run(a)
	if err != nil && a.ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// SIGTERM or Ctrl-C while starting (connecting, migrating): a
		// stop that was asked for, not a failure.
		a.log.Info("stopped while starting", "err", err)
		return nil
	}
	return err
}

func (c *runCmd) run(a *app) error {
	// Settings are checked before anything connects, so a mistake is
	// reported at once with the flag to fix.
	var err error
	if c.serviceFlags.admin, err = c.adminFlags.settings(); err != nil {
		return err
	}
	if c.serviceFlags.admin.insecure {
		warnAdminInsecure(a, c.AdminAddr)
	}
	if c.serviceFlags.kafkaOpts, err = c.kafkaSecurityFlags.clientOpts(); err != nil {
		return err
	}
	if err := c.edgeFlags.check(a); err != nil {
		return err
	}
	if c.serviceFlags.tel, err = c.telemetryFlags.telemetry(a.ctx); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), 5*time.Second)
		defer cancel()
		_ = c.serviceFlags.tel.Shutdown(sctx)
	}()
	if c.OwnerURL != "" {
		if err := migrate(a.ctx, a, c.OwnerURL); err != nil {
			return err
		}
	}
	pool, err := c.pool(a.ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := schema.Check(a.ctx, pool); err != nil {
		if errors.Is(err, schema.ErrBehind) {
			return fmt.Errorf("refusing to start: %w", err)
		}
		return err
	}
	store, err := settle.Open(a.ctx, pool, c.settleFlags.config(c.topicFlags))
	if err != nil {
		return err
	}
	p, err := c.serviceFlags.pipeline(a, store, c.Brokers, c.topicFlags)
	if err != nil {
		return err
	}
	p.edge, p.settlementsTopic = c.edgeFlags, c.SettlementsTopic
	p.sweeper = &sweeper{store: store, orphanAfter: c.OrphanAfter, interval: c.SweepInterval, log: a.log}
	return p.run(a.ctx, a)
}

// pipeline builds the consumer and relay of the service.
func (f serviceFlags) pipeline(a *app, store *settle.Store, brokers []string, t topicFlags) (*pipeline, error) {
	tel := f.tel
	if tel == nil { // settle dev: metrics on, no trace export
		var err error
		if tel, err = (telemetryFlags{}).telemetry(a.ctx); err != nil {
			return nil, err
		}
	}
	kopts := append([]kgoOpt{kafkaLogger(a)}, f.kafkaOpts...)
	cons, err := consumer.New(store, consumer.Config{
		Brokers: brokers, Group: f.Group, Topic: t.Topic, ResultsTopic: t.ResultsTopic,
		PollRecordsMax: f.PollRecordsMax, RecordAttemptsMax: f.RecordAttempts, BackoffMax: f.BackoffMax,
		SessionTimeout: f.SessionTimeout, RebalanceTimeout: f.RebalanceTimeout, DrainTimeout: f.ShutdownTimeout / 3,
		Logger: a.log, ClientOpts: kopts,
		Metrics: tel.Metrics, TracerProvider: tel.TracerProvider(),
	})
	if err != nil {
		return nil, usageError{err.Error()}
	}
	rel, err := relay.New(store, relay.Config{Brokers: brokers, BackoffMax: f.BackoffMax,
		FlushTimeout: f.ShutdownTimeout / 3, Logger: a.log, ClientOpts: kopts,
		Metrics: tel.Metrics, TracerProvider: tel.TracerProvider()})
	if err != nil {
		return nil, usageError{err.Error()}
	}
	// Bound now: `settle dev` prints where the analyst page is only once it
	// is there, and a taken port is reported before the consumer and the
	// relay start.
	ln, err := net.Listen("tcp", f.AdminAddr)
	if err != nil {
		return nil, fmt.Errorf("admin listener on %s: %w (choose another with --admin-addr)", f.AdminAddr, err)
	}
	// settings() judged the address as written; this judges what was bound.
	if tcp, ok := ln.Addr().(*net.TCPAddr); len(f.admin.tokens) == 0 && !f.admin.insecure && (!ok || !tcp.IP.IsLoopback()) {
		_ = ln.Close() // refused before use; the refusal is the error to report
		return nil, usageError{fmt.Sprintf("--admin-addr %s bound %s, beyond loopback, and no analyst has a token: give --admin-token NAME=TOKEN or --admin-insecure", f.AdminAddr, ln.Addr())}
	}
	// The analysts' page replays dead letters with a producer of its own,
	// with the service's Kafka settings; it connects on first use.
	replay, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks())}, kopts...)...)
	if err != nil {
		_ = ln.Close() // not used yet; the client's error is the one to report
		return nil, usageError{fmt.Sprintf("--brokers: %v", err)}
	}
	p := &pipeline{store: store, consumer: cons, relay: rel, admin: ln, adminTokens: f.admin.tokens,
		adminHosts: adminHosts(ln.Addr(), f.admin.hosts), adminZone: f.admin.zone, replayer: replay,
		shutdownTimeout: f.ShutdownTimeout}
	p.telemetry, p.brokers, p.kafkaOpts, p.group = tel, brokers, f.kafkaOpts, f.Group
	return p, nil
}
