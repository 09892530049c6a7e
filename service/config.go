package service

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/edge/ingest"
	"github.com/settlehq/settle/edge/webhook"
	"github.com/settlehq/settle/internal/kafkalog"
	"github.com/settlehq/settle/relay"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/retention"
	"github.com/settlehq/settle/telemetry"
)

// Defaults of Config's zero values.
const (
	ShutdownTimeoutDefault = 30 * time.Second
	SweepIntervalDefault   = 10 * time.Second
	OrphanAfterDefault     = 24 * time.Hour
	APIAddrDefault         = "127.0.0.1:8081"
)

// Config configures the service. It holds plain values and dependencies
// that are already built: the caller opens the store and the telemetry
// and closes them after Run returns. Every field but Store and Brokers
// has a documented zero value.
type Config struct {
	// Store is the settlement core the service runs over; readiness pings
	// its pool and checks its schema. Required.
	Store *settle.Store

	// Brokers are the Kafka seed brokers, host:port. Required.
	Brokers []string

	// KafkaOpts are franz-go options every Kafka client of the service
	// gets (TLS, SASL): the consumer's, the relay's, the dead-letter
	// replayer's, readiness's and the lag gauge's.
	KafkaOpts []kgo.Opt

	// Consumer configures the consumer group member. Left zero, Brokers
	// are Brokers, Logger is Logger, Metrics and TracerProvider are
	// Telemetry's, DrainTimeout is a third of ShutdownTimeout and LanesMax
	// is lanesMaxFor the store's database; its ClientOpts come after
	// KafkaOpts.
	Consumer consumer.Config

	// Relay configures the outbox relay, filled in as Consumer is, with
	// FlushTimeout a third of ShutdownTimeout.
	Relay relay.Config

	// SweepInterval is how often expired holds, orphans and operations
	// whose target settled are swept. 0 = 10s; negative = no sweeper.
	SweepInterval time.Duration

	// OrphanAfter is how long an operation waits for its target before it
	// opens an orphan case. 0 = 24h.
	OrphanAfter time.Duration

	// PruneInterval is how often the sweeper removes operational history
	// (retention.Store.Prune: published outbox rows, repeated deliveries of closed
	// periods, dead letters past PruneDeadLettersAfter). 0 = never; dedup
	// state (identities) is kept whatever it is.
	PruneInterval time.Duration

	// PruneDeadLettersAfter: with PruneInterval, dead letters older than
	// this are removed too. 0 = dead letters are kept.
	PruneDeadLettersAfter time.Duration

	// PruneCanaryKeep: with PruneInterval, the canary tenant's accounts
	// with nothing newer than this are removed whole (retention.Options
	// CanaryBefore). 0 = keep them; else at least retention.CanaryKeepFloor.
	PruneCanaryKeep time.Duration

	// AdminAddr is the listen address of /livez, /readyz, /metrics and the
	// analysts' page. "" = no admin listener. Beyond loopback it needs an
	// analyst's token (Analyst.Tokens) or AdminInsecure.
	AdminAddr string

	// AdminInsecure serves the analysts' page beyond loopback without a
	// token: whoever reaches the port reads and resolves every case.
	AdminInsecure bool

	// ReadPool is the pool the analysts' page and API read over, a pool of
	// their own on Store's database, so that their reads cannot take the
	// connections settling and the records API need. nil = Store's pool
	// (Analyst.ReadsMax still bounds how many of its connections the
	// reads hold). The caller opens and closes it.
	ReadPool *pgxpool.Pool

	// Analyst configures the analysts' page. Left zero, Store is Store
	// (its reads over ReadPool), ReadsMax is ReadPool's size,
	// Logger is Logger and Replayer replays with the service's own
	// producer. Its Hosts are answered besides the bound listener's own
	// addresses.
	Analyst analyst.Config

	// APIAddr is the listen address of the records API. "" =
	// 127.0.0.1:8081. The API is served only when API.Tokens is not
	// empty.
	APIAddr string

	// API configures the records API (package edge/ingest). Logger left
	// nil is Logger.
	API ingest.Config

	// Webhook configures webhook delivery of settlements (package
	// edge/webhook), which runs when Webhook.URL is set. Left zero, Topic
	// is the store's settlements topic and Logger is Logger.
	Webhook webhook.Config

	// CanaryEvery runs the canary (package canary) on this interval
	// against the service's own topics, with its Kafka options, logger
	// and metrics. 0 = no canary.
	CanaryEvery time.Duration

	// CanaryUnreadyAfter: with CanaryEvery, /readyz fails once this many
	// canary runs in a row have failed, and recovers at its next pass.
	// 0 = the canary never touches readiness.
	CanaryUnreadyAfter int

	// Telemetry serves /metrics, receives the consumer's and relay's
	// measurements and spans, and the gauges read at scrape time (outbox
	// backlog, open cases, readiness, consumer lag). nil = none of these.
	Telemetry *telemetry.Telemetry

	// ShutdownTimeout bounds the whole stop: finish the batch, commit,
	// leave the group, flush the outbox. 0 = 30s.
	ShutdownTimeout time.Duration

	// Logger receives the service's log and its Kafka clients'.
	// nil = slog.Default().
	Logger *slog.Logger
}

// ConfigError is a setting that cannot work: changing the Config, not
// trying again, fixes it.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// withDefaults returns c with its zero values filled in, the components'
// configurations included.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = ShutdownTimeoutDefault
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = SweepIntervalDefault
	}
	if c.OrphanAfter == 0 {
		c.OrphanAfter = OrphanAfterDefault
	}
	if c.APIAddr == "" {
		c.APIAddr = APIAddrDefault
	}
	kopts := c.clientOpts()

	cc := &c.Consumer
	if cc.Group == "" {
		// The consumer's own default, named here because the lag gauge
		// asks the brokers about the group.
		cc.Group = "settle"
	}
	if len(cc.Brokers) == 0 {
		cc.Brokers = c.Brokers
	}
	if cc.Logger == nil {
		cc.Logger = c.Logger
	}
	if cc.DrainTimeout == 0 {
		cc.DrainTimeout = c.ShutdownTimeout / 3
	}
	if cc.LanesMax == 0 && c.Store != nil {
		cc.LanesMax = lanesMaxFor(c.Store.Pool().Config().ConnConfig.Host)
	}
	cc.ClientOpts = append(kopts[:len(kopts):len(kopts)], cc.ClientOpts...)

	rc := &c.Relay
	if len(rc.Brokers) == 0 {
		rc.Brokers = c.Brokers
	}
	if rc.Logger == nil {
		rc.Logger = c.Logger
	}
	if rc.FlushTimeout == 0 {
		rc.FlushTimeout = c.ShutdownTimeout / 3
	}
	rc.ClientOpts = append(kopts[:len(kopts):len(kopts)], rc.ClientOpts...)

	if c.Telemetry != nil {
		if cc.Metrics == nil {
			cc.Metrics = c.Telemetry.Metrics
		}
		if cc.TracerProvider == nil {
			cc.TracerProvider = c.Telemetry.TracerProvider()
		}
		if rc.Metrics == nil {
			rc.Metrics = c.Telemetry.Metrics
		}
		if rc.TracerProvider == nil {
			rc.TracerProvider = c.Telemetry.TracerProvider()
		}
	}

	if c.Analyst.Store == nil && c.Store != nil {
		c.Analyst.Store = analyst.StoreOf(c.Store)
		if c.ReadPool != nil {
			c.Analyst.Store = analyst.StoreOn(c.Store, c.ReadPool)
		}
	}
	if c.Analyst.ReadsMax == 0 && c.ReadPool != nil {
		c.Analyst.ReadsMax = int(c.ReadPool.Config().MaxConns)
	}
	if c.Analyst.Logger == nil {
		c.Analyst.Logger = c.Logger
	}
	if c.API.Logger == nil {
		c.API.Logger = c.Logger
	}
	if c.Webhook.Topic == "" && c.Store != nil {
		c.Webhook.Topic = c.Store.Config().SettlementsTopic
	}
	if c.Webhook.Logger == nil {
		c.Webhook.Logger = c.Logger
	}
	return c
}

// clientOpts are the options of every Kafka client that works for the
// service (the consumer's, the relay's, the replayer's): the log, then
// KafkaOpts. The readiness and lag clients take KafkaOpts alone: their
// failures are reported where they are asked for.
func (c Config) clientOpts() []kgo.Opt {
	return append([]kgo.Opt{kafkalog.Option(c.Logger)}, c.KafkaOpts...)
}

// Validate reports the first setting that cannot work, saying how to fix
// it, before anything is bound or connected.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Store == nil:
		return errors.New("service: no store: open one with settle.Open and set Config.Store")
	case c.ShutdownTimeout < 0:
		return fmt.Errorf("service: shutdown timeout %s: must be positive (0 = %s)", c.ShutdownTimeout, ShutdownTimeoutDefault)
	case c.OrphanAfter < 0:
		return fmt.Errorf("service: orphan after %s: must be positive (0 = %s)", c.OrphanAfter, OrphanAfterDefault)
	case c.PruneInterval < 0 || c.PruneDeadLettersAfter < 0:
		return fmt.Errorf("service: prune interval %s, dead letters after %s: must be positive (0 = never)", c.PruneInterval, c.PruneDeadLettersAfter)
	case c.PruneCanaryKeep < 0 || (c.PruneCanaryKeep > 0 && c.PruneCanaryKeep < retention.CanaryKeepFloor):
		return fmt.Errorf("service: prune canary keep %s: at least %s (the canary writes yesterday's account until its runs end), or 0 to keep it", c.PruneCanaryKeep, retention.CanaryKeepFloor)
	case c.PruneInterval > 0 && c.SweepInterval < 0:
		return errors.New("service: a prune interval needs the sweeper: set SweepInterval >= 0")
	case c.CanaryEvery < 0 || (c.CanaryEvery > 0 && c.CanaryEvery < CanaryIntervalShortest):
		return fmt.Errorf("service: canary every %s: at least %s (a run waits for a delayed retry and its outcomes), or 0 for none", c.CanaryEvery, CanaryIntervalShortest)
	case c.CanaryUnreadyAfter < 0 || (c.CanaryUnreadyAfter > 0 && c.CanaryEvery == 0):
		return fmt.Errorf("service: canary unready after %d: needs a canary (CanaryEvery) and a count >= 1, or 0", c.CanaryUnreadyAfter)
	}
	if err := c.Consumer.Validate(); err != nil {
		return err
	}
	if err := c.Relay.Validate(); err != nil {
		return err
	}
	if c.AdminAddr != "" {
		if err := c.Analyst.Validate(); err != nil {
			return err
		}
	}
	if len(c.API.Tokens) > 0 {
		if err := c.API.Validate(); err != nil {
			return err
		}
	}
	if c.Webhook.URL != "" {
		if err := c.Webhook.Validate(); err != nil {
			return err
		}
	}
	return nil
}
