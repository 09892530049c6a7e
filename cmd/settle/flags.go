package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/kafkalog"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/schema"
)

// databaseFlags are the service's database settings.
type databaseFlags struct {
	DatabaseURL  string `name:"database-url" env:"SETTLE_DATABASE_URL,DATABASE_URL" default:"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable" help:"PostgreSQL URL."`
	PoolMaxConns int32  `name:"pool-max-conns" hidden:"" env:"SETTLE_POOL_MAX_CONNS" default:"16" help:"Most connections the service opens."`
}

// pool opens the settling path's connection pool and checks that the
// server answers.
func (f databaseFlags) pool(ctx context.Context) (*pgxpool.Pool, error) {
	return f.openPool(ctx, true)
}

// openPool opens a pool: for the settling path (settling), or for
// commands that only read (reconcile, statement, explain, exports), whose
// snapshot may wait idle for as long as the reader takes (a source file
// streaming, a slow terminal) and holds no lock a settling transaction
// waits on, so no idle-in-transaction timeout ends it, whatever the URL,
// the database or the role set; the command's own context ends it.
func (f databaseFlags) openPool(ctx context.Context, settling bool) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(f.DatabaseURL)
	if err != nil {
		return nil, usageError{fmt.Sprintf("--database-url: %v", err)}
	}
	if f.PoolMaxConns > 0 {
		cfg.MaxConns = f.PoolMaxConns
	}
	// A process frozen mid-transaction (SIGSTOP, a long GC pause, a VM
	// migration) must not hold row locks the next owner of its partitions
	// waits on: PostgreSQL ends such a session, and the transaction rolls
	// back (it never committed, so nothing is lost). Unless the URL says
	// otherwise.
	const idle = "idle_in_transaction_session_timeout"
	if _, set := cfg.ConnConfig.RuntimeParams[idle]; !settling {
		cfg.ConnConfig.RuntimeParams[idle] = "0"
	} else if !set {
		cfg.ConnConfig.RuntimeParams[idle] = "30000"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %w (%s)", redact(f.DatabaseURL), err, connectHint(err))
	}
	return pool, nil
}

// kafkaFlags are the broker settings.
type kafkaFlags struct {
	kafkaSecurityFlags `embed:""`
	Brokers            []string `name:"brokers" env:"SETTLE_KAFKA_BROKERS,KAFKA_BROKERS" default:"127.0.0.1:9092" sep:"," help:"Kafka seed brokers, host:port,..."`
}

// topicFlags name the pipeline's topics.
type topicFlags struct {
	Topic            string `name:"topic" env:"SETTLE_TOPIC" default:"usage" help:"Usage topic consumed."`
	ResultsTopic     string `name:"results-topic" hidden:"" env:"SETTLE_RESULTS_TOPIC" default:"usage.results" help:"Topic for one result per input record."`
	SettlementsTopic string `name:"settlements-topic" hidden:"" env:"SETTLE_SETTLEMENTS_TOPIC" default:"settlements" help:"Topic for settlements, relayed from the outbox."`
	DeadLetterTopic  string `name:"dlq-topic" hidden:"" env:"SETTLE_DLQ_TOPIC" default:"usage.dlq" help:"Dead-letter topic."`
}

// settleFlags configure the settlement core.
type settleFlags struct {
	BatchRecordsMax int           `name:"batch-records-max" hidden:"" env:"SETTLE_BATCH_RECORDS_MAX" default:"1000" help:"Most records settled in one transaction."`
	RecordBytesMax  int           `name:"record-bytes-max" hidden:"" env:"SETTLE_RECORD_BYTES_MAX" default:"65536" help:"Largest record value accepted, in bytes; larger ones are dead-lettered too_large."`
	DLQValueBytes   int           `name:"dlq-value-bytes-max" hidden:"" env:"SETTLE_DLQ_VALUE_BYTES_MAX" default:"262144" help:"Largest original value a dead-letter message carries; a larger one goes without it, with header dlq_value_truncated (its length), and stays whole in the database."`
	Tenants         []string      `name:"tenants" env:"SETTLE_TENANTS" sep:"," help:"Tenants records may name, comma-separated; empty accepts any."`
	OrphanAfter     time.Duration `name:"orphan-after" hidden:"" env:"SETTLE_ORPHAN_AFTER" default:"24h" help:"How long an operation waits for its target before it opens an orphan case (a capture is charged as plain usage instead)."`
	SweepInterval   time.Duration `name:"sweep-interval" hidden:"" env:"SETTLE_SWEEP_INTERVAL" default:"10s" help:"How often expired holds, orphans and operations whose target settled are swept."`
	PruneInterval   time.Duration `name:"prune-interval" hidden:"" env:"SETTLE_PRUNE_INTERVAL" default:"0s" help:"How often operational history is removed, as settle prune does (0 = never; identities are always kept)."`
	PruneDLQAfter   time.Duration `name:"prune-dead-letters-after" hidden:"" env:"SETTLE_PRUNE_DEAD_LETTERS_AFTER" default:"0s" help:"With --prune-interval, also remove dead letters older than this (0 = keep them)."`
	PruneCanaryKeep time.Duration `name:"prune-canary-keep" hidden:"" env:"SETTLE_PRUNE_CANARY_KEEP" default:"0s" help:"With --prune-interval, also remove the canary tenant's accounts older than this, at least 48h (0 = keep them; settle prune --canary-keep)."`
}

func (f settleFlags) config(t topicFlags) settle.Config {
	return settle.Config{
		Decoder:          record.Config{RecordBytesMax: f.RecordBytesMax, Tenants: f.Tenants},
		BatchRecordsMax:  f.BatchRecordsMax,
		SettlementsTopic: t.SettlementsTopic,
		ResultsTopic:     t.ResultsTopic,
		DeadLetterTopic:  t.DeadLetterTopic,

		DeadLetterValueBytesMax: f.DLQValueBytes,
	}
}

// migrate applies the embedded migrations over a connection to ownerURL
// and reports what it did.
func migrate(ctx context.Context, a *app, ownerURL string) error {
	conn, err := pgx.Connect(ctx, ownerURL)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL at %s with the owner URL: %w", redact(ownerURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	applied, err := schema.Migrate(ctx, conn)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		a.log.Info("schema is current", "version", schema.Version())
	} else {
		a.log.Info("schema migrated", "applied", applied, "version", schema.Version())
	}
	return nil
}

// redact hides a URL's password for messages.
func redact(u string) string {
	if cfg, err := pgx.ParseConfig(u); err == nil && cfg.Password != "" {
		return strings.Replace(u, cfg.Password, "xxxxx", 1)
	}
	return u
}

// kgoOpt is a franz-go client option.
type kgoOpt = kgo.Opt

// kafkaLogger routes franz-go's warnings and errors to the command's log.
func kafkaLogger(a *app) kgo.Opt { return kafkalog.Option(a.log) }

// connectHint says what to do about a failed connection: a server that
// answered with an error needs another fix than one that did not answer.
func connectHint(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "3D000":
			return "create the database (settle migrate needs it to exist) or fix the database name in --database-url"
		case "28000", "28P01":
			return "check the user and password in --database-url"
		}
		return "the server refused the connection: check --database-url"
	}
	return "is PostgreSQL running? check --database-url / DATABASE_URL"
}
