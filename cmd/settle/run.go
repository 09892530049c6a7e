package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/relay"
	"github.com/settlehq/settle/settle"
)

// runCmd is the service.
type runCmd struct {
	databaseFlags `embed:""`
	kafkaFlags    `embed:""`
	topicFlags    `embed:""`
	settleFlags   `embed:""`
	serviceFlags  `embed:""`

	OwnerURL string `name:"owner-url" env:"SETTLE_OWNER_URL" help:"Schema owner's PostgreSQL URL: when given, run migrates the schema before starting; without it, run refuses a schema that is behind (${env})."`
}

// serviceFlags configure the long-running pipeline.
type serviceFlags struct {
	Group           string        `name:"group" env:"SETTLE_GROUP" default:"settle" help:"Kafka consumer group (${env})."`
	AdminAddr       string        `name:"admin-addr" env:"SETTLE_ADMIN_ADDR" default:"127.0.0.1:8080" help:"Listen address of /livez and /readyz; loopback by default (${env})."`
	ShutdownTimeout time.Duration `name:"shutdown-timeout" env:"SETTLE_SHUTDOWN_TIMEOUT" default:"30s" help:"Longest a stop may take: finish the batch, commit, leave the group, flush the outbox (${env})."`
	SessionTimeout  time.Duration `name:"session-timeout" env:"SETTLE_SESSION_TIMEOUT" default:"45s" help:"Consumer group session timeout (${env})."`
	PollRecordsMax  int           `name:"poll-records-max" env:"SETTLE_POLL_RECORDS_MAX" default:"10000" help:"Most records taken per poll across partitions (${env})."`
	RecordAttempts  int           `name:"record-attempts-max" env:"SETTLE_RECORD_ATTEMPTS_MAX" default:"5" help:"Attempts of a record that fails on its own before it is dead-lettered transient_exhausted (${env})."`
	BackoffMax      time.Duration `name:"backoff-max" env:"SETTLE_BACKOFF_MAX" default:"10s" help:"Longest wait between retries during an outage (${env})."`
}

// Run runs the service until SIGINT or SIGTERM.
func (c *runCmd) Run(a *app) error {
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
	if err := settle.CheckSchema(a.ctx, pool); err != nil {
		if errors.Is(err, settle.ErrSchemaBehind) {
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
	p.sweeper = &sweeper{store: store, orphanAfter: c.OrphanAfter, interval: c.SweepInterval, log: a.log}
	return p.run(a.ctx, a)
}

// pipeline builds the consumer and relay of the service.
func (f serviceFlags) pipeline(a *app, store *settle.Store, brokers []string, t topicFlags) (*pipeline, error) {
	cons, err := consumer.New(store, consumer.Config{
		Brokers: brokers, Group: f.Group, Topic: t.Topic, ResultsTopic: t.ResultsTopic,
		PollRecordsMax: f.PollRecordsMax, RecordAttemptsMax: f.RecordAttempts, BackoffMax: f.BackoffMax,
		SessionTimeout: f.SessionTimeout, DrainTimeout: f.ShutdownTimeout / 3,
		Logger: a.log, ClientOpts: []kgoOpt{kafkaLogger(a)},
	})
	if err != nil {
		return nil, usageError{err.Error()}
	}
	rel, err := relay.New(store, relay.Config{Brokers: brokers, BackoffMax: f.BackoffMax,
		FlushTimeout: f.ShutdownTimeout / 3, Logger: a.log, ClientOpts: []kgoOpt{kafkaLogger(a)}})
	if err != nil {
		return nil, usageError{err.Error()}
	}
	return &pipeline{store: store, consumer: cons, relay: rel, adminAddr: f.AdminAddr, shutdownTimeout: f.ShutdownTimeout}, nil
}
