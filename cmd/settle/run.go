package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/internal/cpuprofile"
	"github.com/settlehq/settle/relay"
	"github.com/settlehq/settle/service"
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

	ReadPoolMaxConns   int32         `name:"read-pool-max-conns" hidden:"" env:"SETTLE_READ_POOL_MAX_CONNS" default:"4" help:"Connections of the analysts' page and API, a pool of their own beside --pool-max-conns; as many reads run at once, more are answered 503 with Retry-After."`
	CanaryEvery        time.Duration `name:"canary-every" hidden:"" env:"SETTLE_CANARY_EVERY" help:"Run the canary (settle canary) on this interval, at least 10s; 0 = none. docs/operations.md says what its records cost."`
	CanaryUnreadyAfter int           `name:"canary-unready-after" hidden:"" env:"SETTLE_CANARY_UNREADY_AFTER" help:"Fail /readyz after this many canary runs in a row failed; 0 = never."`

	OwnerURL string `name:"owner-url" env:"SETTLE_OWNER_URL" help:"Schema owner's URL: migrate before starting (else a schema behind is refused)."`

	CPUProfile string `name:"cpuprofile" env:"SETTLE_CPUPROFILE" hidden:"" help:"Write a CPU profile (pprof) of the service to this file until it stops (settle-bench --only edge passes the environment on to the settle run it drives)."`
}

// serviceFlags configure the long-running pipeline.
type serviceFlags struct {
	adminFlags       `embed:""`
	Group            string        `name:"group" env:"SETTLE_GROUP" default:"settle" help:"Kafka consumer group."`
	ShutdownTimeout  time.Duration `name:"shutdown-timeout" hidden:"" env:"SETTLE_SHUTDOWN_TIMEOUT" default:"30s" help:"Longest a stop may take: finish the batch, commit, leave the group, flush the outbox."`
	SessionTimeout   time.Duration `name:"session-timeout" hidden:"" env:"SETTLE_SESSION_TIMEOUT" default:"45s" help:"Consumer group session timeout."`
	RebalanceTimeout time.Duration `name:"rebalance-timeout" hidden:"" env:"SETTLE_REBALANCE_TIMEOUT" default:"60s" help:"How long the group waits for members to rejoin during a rebalance; a killed member stalls the group this long."`
	PollRecordsMax   int           `name:"poll-records-max" hidden:"" env:"SETTLE_POLL_RECORDS_MAX" default:"50000" help:"Most records taken per poll across partitions; a poll is settled (each partition in order, the partitions in parallel) before the offsets are committed."`
	LanesMax         int           `name:"lanes-max" hidden:"" env:"SETTLE_LANES_MAX" default:"0" help:"Most settling transactions the consumer runs at once (a poll's partitions share that many lanes). 0 = the CPUs Go may use (at least 2) when PostgreSQL is on this machine (a loopback address or a socket), else one per partition."`
	RecordAttempts   int           `name:"record-attempts-max" hidden:"" env:"SETTLE_RECORD_ATTEMPTS_MAX" default:"5" help:"Attempts of a record that fails on its own before it is dead-lettered transient_exhausted."`
	BackoffMax       time.Duration `name:"backoff-max" hidden:"" env:"SETTLE_BACKOFF_MAX" default:"10s" help:"Longest wait between retries during an outage."`

	// Set by the command before config(), not flags: the checked admin
	// flags, the brokers' TLS/SASL options and the process's telemetry
	// (nil = a default one).
	admin     adminSettings
	kafkaOpts []kgoOpt
	tel       *telemetry.Telemetry
}

// Run runs the service until SIGINT or SIGTERM.
func (c *runCmd) Run(a *app) (err error) {
	stopProfile, err := cpuprofile.Start(c.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile(&err)
	err = c.run(a)
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
	if c.ReadPoolMaxConns < 1 {
		return usageError{fmt.Sprintf("--read-pool-max-conns %d: want at least 1", c.ReadPoolMaxConns)}
	}
	if err := c.settleFlags.config(c.topicFlags).Decoder.Validate(); err != nil {
		return usageError{err.Error()}
	}
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
	cfg, err := c.serviceFlags.config(a, store, c.Brokers, c.topicFlags)
	if err != nil {
		return err
	}
	if c.AdminAddr != "" {
		// The analysts' reads get a pool of their own, so that a crowd of
		// them cannot hold the connections settling and the records API
		// need. It keeps the idle-in-transaction guard: no read holds a
		// transaction open while it streams (an export reads page by page,
		// a statement each).
		rf := c.databaseFlags
		rf.PoolMaxConns = c.ReadPoolMaxConns
		if cfg.ReadPool, err = rf.pool(a.ctx); err != nil {
			return err
		}
		defer cfg.ReadPool.Close()
	}
	cfg.SweepInterval, cfg.OrphanAfter = c.SweepInterval, c.OrphanAfter
	cfg.PruneInterval, cfg.PruneDeadLettersAfter, cfg.PruneCanaryKeep = c.PruneInterval, c.PruneDLQAfter, c.PruneCanaryKeep
	cfg.CanaryEvery, cfg.CanaryUnreadyAfter = c.CanaryEvery, c.CanaryUnreadyAfter
	if err := c.edgeFlags.apply(&cfg, a, c.SettlementsTopic); err != nil {
		return err
	}
	return serviceErr(service.Run(a.ctx, cfg))
}

// config is the service's configuration these flags ask for, over store.
// Sweeps are off unless the caller sets SweepInterval.
func (f serviceFlags) config(a *app, store *settle.Store, brokers []string, t topicFlags) (service.Config, error) {
	tel := f.tel
	if tel == nil { // settle dev: metrics on, no trace export
		var err error
		if tel, err = (telemetryFlags{}).telemetry(a.ctx); err != nil {
			return service.Config{}, err
		}
	}
	return service.Config{
		Store: store, Brokers: brokers, KafkaOpts: f.kafkaOpts,
		Consumer: consumer.Config{Group: f.Group, Topic: t.Topic, ResultsTopic: t.ResultsTopic,
			PollRecordsMax: f.PollRecordsMax, LanesMax: f.LanesMax, RecordAttemptsMax: f.RecordAttempts, BackoffMax: f.BackoffMax,
			SessionTimeout: f.SessionTimeout, RebalanceTimeout: f.RebalanceTimeout},
		Relay:         relay.Config{BackoffMax: f.BackoffMax},
		SweepInterval: -1,
		AdminAddr:     f.AdminAddr, AdminInsecure: f.admin.insecure,
		Analyst:         analyst.Config{Tokens: f.admin.tokens, Hosts: f.admin.hosts, TimeZone: f.admin.zone},
		Telemetry:       tel,
		ShutdownTimeout: f.ShutdownTimeout,
		Logger:          a.log,
	}, nil
}

// serviceErr maps the service's configuration errors to usage errors
// (exit 2): a flag to fix, not an outage.
func serviceErr(err error) error {
	var ce *service.ConfigError
	if errors.As(err, &ce) {
		return usageError{err.Error()}
	}
	return err
}
