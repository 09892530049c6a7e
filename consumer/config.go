package consumer

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"go.opentelemetry.io/otel/trace"

	"github.com/settlehq/settle/internal/backoff"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/telemetry"
)

// Config configures a Consumer. The zero value of every field but Brokers
// is a documented default.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string

	// Group is the consumer group. "" = "settle".
	Group string

	// Topic is the usage topic read. "" = "usage".
	Topic string

	// ResultsTopic receives one result per input record.
	// "" = "usage.results".
	ResultsTopic string

	// PollRecordsMax caps the records taken from the client per poll (all
	// partitions together); each partition's share is cut into batches of
	// the store's BatchRecordsMax. 0 = 50,000.
	PollRecordsMax int

	// LanesMax caps the lanes a poll is settled in, and so the settling
	// transactions the consumer runs at once; a lane then settles several
	// partitions one after the other. 0 = no cap: a lane per partition
	// (service.Config caps it when PostgreSQL shares the machine).
	LanesMax int

	// RecordAttemptsMax is how often one record that fails on its own
	// (isolated by bisection) is tried before it is dead-lettered
	// transient_exhausted. 0 = 5.
	RecordAttemptsMax int

	// BackoffMin and BackoffMax bound the capped exponential backoff used
	// while the database or the broker is unavailable and between attempts
	// of a failing record. 0 = 100ms and 10s.
	BackoffMin, BackoffMax time.Duration

	// ProduceTimeout bounds one attempt to publish a batch's results; a
	// failed attempt is retried with backoff, so it only decides how soon
	// an outage of the broker shows in Ready. 0 = 30s.
	ProduceTimeout time.Duration

	// SessionTimeout is the group session timeout: how long the group
	// waits for a dead member. 0 = 45s (the Kafka default). Tests use ~1s.
	SessionTimeout time.Duration

	// RebalanceTimeout is how long the group waits for members to finish
	// their batches in a rebalance. 0 = 60s.
	RebalanceTimeout time.Duration

	// DrainTimeout bounds how long a stopping consumer keeps working on the
	// batch it holds before abandoning it (abandoned records are read
	// again by the next owner, so nothing is lost). 0 = 10s.
	DrainTimeout time.Duration

	// DecompressBatchBytesMax caps what one compressed record batch may
	// decompress to; a larger batch is dead-lettered whole
	// (batch_too_large) and its partition moves past it (skip.go).
	// 0 = DecompressBatchBytesFor(the process's memory limit): 1/16 of it,
	// between 4 MiB and 64 MiB (24 MiB at the default 384 MiB).
	DecompressBatchBytesMax int

	// ClientOpts are extra franz-go options (TLS, SASL, logging). They are
	// applied after the consumer's own, so they can override them: do not
	// override the group options (above all the balancers: a cooperative
	// or server-side one undoes the fencing of commits to their
	// membership, see Run) unless you know why they are set.
	ClientOpts []kgo.Opt

	// Logger receives the consumer's log. nil = slog.Default().
	Logger *slog.Logger

	// Metrics receives the consumer's measurements (records by outcome
	// and kind, batch sizes, transaction latency, end-to-end latency,
	// retries, dead letters). nil = none.
	Metrics *telemetry.Metrics

	// TracerProvider starts one span per record, a child of the trace
	// context in its headers, carried on to its result and settlement.
	// nil = no spans (the headers still pass through unchanged).
	TracerProvider trace.TracerProvider
}

func (c *Config) setDefaults() {
	c.Group = cmp.Or(c.Group, "settle")
	c.Topic = cmp.Or(c.Topic, message.TopicUsage)
	c.ResultsTopic = cmp.Or(c.ResultsTopic, message.TopicResults)
	c.PollRecordsMax = cmp.Or(c.PollRecordsMax, 50_000)
	c.RecordAttemptsMax = cmp.Or(c.RecordAttemptsMax, 5)
	c.BackoffMin = cmp.Or(c.BackoffMin, 100*time.Millisecond)
	c.BackoffMax = cmp.Or(c.BackoffMax, 10*time.Second)
	c.ProduceTimeout = cmp.Or(c.ProduceTimeout, 30*time.Second)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, 45*time.Second)
	c.RebalanceTimeout = cmp.Or(c.RebalanceTimeout, 60*time.Second)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, 10*time.Second)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.DecompressBatchBytesMax == 0 {
		c.DecompressBatchBytesMax = DecompressBatchBytesFor(memoryLimit())
	}
}

// retryPolicy is the backoff of every retry loop of the consumer. The
// jitter only shortens a wait (to no less than half of it), so BackoffMax
// stays the longest pause an outage causes, while members that failed
// together fall out of step.
func (c Config) retryPolicy() backoff.Policy {
	return backoff.Policy{Min: c.BackoffMin, Max: c.BackoffMax, Jitter: backoff.Jitter{Below: 0.5}}
}

// Validate reports the first setting that cannot work, saying how to fix it.
func (c Config) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("consumer: no brokers: set at least one host:port (--brokers or KAFKA_BROKERS)")
	case c.PollRecordsMax < 0 || c.PollRecordsMax > 1_000_000:
		return fmt.Errorf("consumer: poll records max %d: must be between 1 and 1000000 (0 = 50000)", c.PollRecordsMax)
	case c.LanesMax < 0 || c.LanesMax > 1024:
		return fmt.Errorf("consumer: lanes max %d: must be between 0 and 1024 (0 = a lane per partition)", c.LanesMax)
	case c.RecordAttemptsMax < 0 || c.RecordAttemptsMax > 100:
		return fmt.Errorf("consumer: record attempts max %d: must be between 1 and 100 (0 = 5)", c.RecordAttemptsMax)
	case c.BackoffMin < 0 || c.BackoffMax < 0 || (c.BackoffMax != 0 && c.BackoffMin > c.BackoffMax):
		return fmt.Errorf("consumer: backoff %s..%s: must be positive with min <= max", c.BackoffMin, c.BackoffMax)
	case c.DecompressBatchBytesMax < 0:
		return fmt.Errorf("consumer: decompress batch bytes max %d: must be positive (0 = derived from the memory limit)", c.DecompressBatchBytesMax)
	case c.SessionTimeout < 0 || c.RebalanceTimeout < 0 || c.DrainTimeout < 0 || c.ProduceTimeout < 0:
		return errors.New("consumer: timeouts must be positive (0 = default)")
	}
	return nil
}
