package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// The metric names as Prometheus sees them (the exporter adds _total to
// counters and _seconds to durations). The dashboard and alerts use these.
const (
	MetricRecords           = "settle_records_total"                // {outcome, kind, reason}
	MetricBatchRecords      = "settle_batch_records"                // histogram
	MetricTransaction       = "settle_transaction_duration_seconds" // histogram {result}
	MetricEndToEnd          = "settle_end_to_end_latency_seconds"   // histogram: record timestamp → results published
	MetricRetries           = "settle_retries_total"                // {cause}
	MetricDeadLetters       = "settle_dead_letters_total"           // {reason}
	MetricOutboxBacklog     = "settle_outbox_backlog"               // gauge: rows not yet published
	MetricOutboxOldestAge   = "settle_outbox_oldest_age_seconds"    // gauge
	MetricOutboxPublished   = "settle_outbox_published_total"       // {topic}
	MetricRelayParked       = "settle_relay_parked_total"           // {reason}
	MetricConsumerLag       = "settle_consumer_lag"                 // gauge {topic, partition}
	MetricConflictCasesOpen = "settle_conflict_cases_open"          // gauge
	MetricReady             = "settle_ready"                        // gauge 0/1
	MetricBatchesSkipped    = "settle_batches_skipped_total"        // {topic, partition, reason}
	MetricFetchErrors       = "settle_fetch_errors_total"           // {topic, partition}

	MetricCanaryRuns     = "settle_canary_runs_total"        // {scenario}
	MetricCanaryFailures = "settle_canary_failures_total"    // {scenario}
	MetricCanaryLatency  = "settle_canary_latency_seconds"   // histogram {scenario}: first send → last settlement read
	MetricCanaryLastPass = "settle_canary_last_pass_seconds" // gauge: Unix time of the last run whose every scenario passed
)

// Retry causes (label cause of settle_retries_total).
const (
	CauseUnavailable = "database_unavailable"
	CauseContention  = "contention"
	CauseRecord      = "record_failure"
	CauseBroker      = "broker_unavailable"
)

// Metrics are settle's instruments. The zero of every method on a nil
// *Metrics is a no-op.
type Metrics struct {
	meter       metric.Meter
	records     metric.Int64Counter
	batch       metric.Int64Histogram
	tx          metric.Float64Histogram
	endToEnd    metric.Float64Histogram
	retries     metric.Int64Counter
	deadLetters metric.Int64Counter
	published   metric.Int64Counter
	parked      metric.Int64Counter
	skipped     metric.Int64Counter
	fetchErrors metric.Int64Counter

	canaryRuns     metric.Int64Counter
	canaryFailures metric.Int64Counter
	canaryLatency  metric.Float64Histogram
	canaryLastPass metric.Float64Gauge
}

// NewMetrics creates the instruments on mp (nil = a no-op provider).
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := &Metrics{meter: mp.Meter("github.com/settlehq/settle")}
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	m.records, err = m.meter.Int64Counter("settle_records", metric.WithDescription("Input records handled, by outcome, kind (the identity's operation) and reason; redeliveries included."))
	add(err)
	m.batch, err = m.meter.Int64Histogram("settle_batch_records", metric.WithDescription("Records per settled batch (one transaction)."))
	add(err)
	m.tx, err = m.meter.Float64Histogram("settle_transaction_duration", metric.WithUnit("s"), metric.WithDescription("Duration of one settling transaction attempt, by result (ok, unavailable, contention, error)."))
	add(err)
	m.endToEnd, err = m.meter.Float64Histogram("settle_end_to_end_latency", metric.WithUnit("s"), metric.WithDescription("From the input record's Kafka timestamp to its result being published."))
	add(err)
	m.retries, err = m.meter.Int64Counter("settle_retries", metric.WithDescription("Retries, by cause: database_unavailable, contention, record_failure, broker_unavailable."))
	add(err)
	m.deadLetters, err = m.meter.Int64Counter("settle_dead_letters", metric.WithDescription("Records dead-lettered, by reason."))
	add(err)
	m.published, err = m.meter.Int64Counter("settle_outbox_published", metric.WithDescription("Outbox messages published and marked, by topic."))
	add(err)
	m.parked, err = m.meter.Int64Counter("settle_relay_parked", metric.WithDescription("Outbox messages the broker refused for good (message_too_large, invalid_record, ...), parked by the relay instead of retried, by reason."))
	add(err)
	m.skipped, err = m.meter.Int64Counter("settle_batches_skipped", metric.WithDescription("Record batches dead-lettered whole and skipped (batch_too_large: past the decompression limit), by topic, partition and reason."))
	add(err)
	m.fetchErrors, err = m.meter.Int64Counter("settle_fetch_errors", metric.WithDescription("Fetches of a partition that failed for a reason the client does not retry by itself (a corrupt batch), by topic and partition."))
	add(err)
	m.canaryRuns, err = m.meter.Int64Counter("settle_canary_runs", metric.WithDescription("Canary runs, by scenario."))
	add(err)
	m.canaryFailures, err = m.meter.Int64Counter("settle_canary_failures", metric.WithDescription("Canary runs whose scenario did not end as the contract says within the deadline, by scenario."))
	add(err)
	m.canaryLatency, err = m.meter.Float64Histogram("settle_canary_latency", metric.WithUnit("s"), metric.WithDescription("From a canary scenario's first send to its last settlement read from the settlements topic."))
	add(err)
	m.canaryLastPass, err = m.meter.Float64Gauge("settle_canary_last_pass", metric.WithUnit("s"), metric.WithDescription("Unix time of the last canary run whose every scenario passed."))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("telemetry: instruments: %w", err)
	}
	return m, nil
}

// histogramViews sets bucket boundaries that fit what is measured:
// milliseconds to tens of seconds for latencies, 1 to 100k records.
func histogramViews() []sdkmetric.View {
	seconds := []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
	records := []float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000, 100000}
	view := func(name string, b []float64) sdkmetric.View {
		return sdkmetric.NewView(sdkmetric.Instrument{Name: name},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: b}})
	}
	return []sdkmetric.View{
		view("settle_transaction_duration", seconds),
		view("settle_end_to_end_latency", seconds),
		view("settle_batch_records", records),
		view("settle_canary_latency", seconds),
	}
}

// Record counts n input records with one outcome, kind and reason.
func (m *Metrics) Record(ctx context.Context, outcome, kind, reason string, n int64) {
	if m == nil || n == 0 {
		return
	}
	if kind == "" {
		kind = "unknown" // a dead letter has no identity
	}
	m.records.Add(ctx, n, metric.WithAttributes(attribute.String("outcome", outcome),
		attribute.String("kind", kind), attribute.String("reason", reason)))
	if outcome == "dead_lettered" {
		m.deadLetters.Add(ctx, n, metric.WithAttributes(attribute.String("reason", reason)))
	}
}

// Batch records the size of one settled batch.
func (m *Metrics) Batch(ctx context.Context, records int) {
	if m == nil {
		return
	}
	m.batch.Record(ctx, int64(records))
}

// Transaction records one settling transaction attempt and its result.
func (m *Metrics) Transaction(ctx context.Context, d time.Duration, result string) {
	if m == nil {
		return
	}
	m.tx.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String("result", result)))
}

// EndToEnd records the time from a record's timestamp to now.
func (m *Metrics) EndToEnd(ctx context.Context, recordTime time.Time) {
	if m == nil || recordTime.IsZero() {
		return
	}
	m.endToEnd.Record(ctx, max(time.Since(recordTime).Seconds(), 0))
}

// Retry counts one retry of a batch, record or publish.
func (m *Metrics) Retry(ctx context.Context, cause string) {
	if m == nil {
		return
	}
	m.retries.Add(ctx, 1, metric.WithAttributes(attribute.String("cause", cause)))
}

// Published counts outbox messages published to topic.
func (m *Metrics) Published(ctx context.Context, topic string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.published.Add(ctx, int64(n), metric.WithAttributes(attribute.String("topic", topic)))
}

// Parked counts outbox messages the relay parked, by the broker's reason.
func (m *Metrics) Parked(ctx context.Context, reason string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.parked.Add(ctx, int64(n), metric.WithAttributes(attribute.String("reason", reason)))
}

// BatchSkipped counts one record batch dead-lettered whole and skipped.
func (m *Metrics) BatchSkipped(ctx context.Context, topic string, partition int32, reason string) {
	if m == nil {
		return
	}
	m.skipped.Add(ctx, 1, metric.WithAttributes(attribute.String("topic", topic),
		attribute.String("partition", strconv.Itoa(int(partition))), attribute.String("reason", reason)))
}

// FetchError counts one failed fetch of a partition.
func (m *Metrics) FetchError(ctx context.Context, topic string, partition int32) {
	if m == nil {
		return
	}
	m.fetchErrors.Add(ctx, 1, metric.WithAttributes(attribute.String("topic", topic),
		attribute.String("partition", strconv.Itoa(int(partition)))))
}

// Canary counts one canary run of scenario, and its seconds from send to
// settlement when it passed.
func (m *Metrics) Canary(ctx context.Context, scenario string, ok bool, seconds float64) {
	if m == nil {
		return
	}
	attrs := metric.WithAttributes(attribute.String("scenario", scenario))
	m.canaryRuns.Add(ctx, 1, attrs)
	if !ok {
		m.canaryFailures.Add(ctx, 1, attrs)
		return
	}
	if seconds > 0 {
		m.canaryLatency.Record(ctx, seconds, attrs)
	}
}

// CanaryPassed records the time of a canary run whose every scenario
// passed.
func (m *Metrics) CanaryPassed(ctx context.Context, at time.Time) {
	if m == nil {
		return
	}
	m.canaryLastPass.Record(ctx, float64(at.Unix()))
}

// Gauges are the callbacks observable gauges read at each scrape. A nil
// callback leaves its gauge out. Each runs with a bounded context; an
// error skips that gauge for the scrape (a stale value is worse than none).
type Gauges struct {
	// OutboxBacklog returns the unpublished rows and the oldest one's time.
	OutboxBacklog func(context.Context) (rows int64, oldest time.Time, err error)
	// ConflictCasesOpen returns how many conflict cases are open.
	ConflictCasesOpen func(context.Context) (int64, error)
	// ConsumerLag returns the group's lag by topic and partition.
	ConsumerLag func(context.Context) (map[string]map[int32]int64, error)
	// Ready reports readiness (the /readyz answer).
	Ready func(context.Context) bool
}

// GaugeTimeout bounds one gauge callback at scrape time.
const GaugeTimeout = 3 * time.Second

// RegisterGauges registers the observable gauges. Call the returned
// function to unregister them.
func (m *Metrics) RegisterGauges(g Gauges) (func() error, error) {
	if m == nil {
		return func() error { return nil }, nil
	}
	backlog, err1 := m.meter.Int64ObservableGauge("settle_outbox_backlog", metric.WithDescription("Outbox rows not yet published."))
	age, err2 := m.meter.Float64ObservableGauge("settle_outbox_oldest_age", metric.WithUnit("s"), metric.WithDescription("Age of the oldest unpublished outbox row (0 when none)."))
	cases, err3 := m.meter.Int64ObservableGauge("settle_conflict_cases_open", metric.WithDescription("Open conflict cases."))
	lag, err4 := m.meter.Int64ObservableGauge("settle_consumer_lag", metric.WithDescription("Records in the usage topic past the group's committed offset, by partition."))
	ready, err5 := m.meter.Int64ObservableGauge("settle_ready", metric.WithDescription("1 when /readyz answers ready."))
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return nil, fmt.Errorf("telemetry: gauges: %w", err)
	}
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, GaugeTimeout)
		defer cancel()
		if g.OutboxBacklog != nil {
			if n, oldest, err := g.OutboxBacklog(ctx); err == nil {
				o.ObserveInt64(backlog, n)
				a := 0.0
				if n > 0 {
					a = max(time.Since(oldest).Seconds(), 0)
				}
				o.ObserveFloat64(age, a)
			}
		}
		if g.ConflictCasesOpen != nil {
			if n, err := g.ConflictCasesOpen(ctx); err == nil {
				o.ObserveInt64(cases, n)
			}
		}
		if g.ConsumerLag != nil {
			if l, err := g.ConsumerLag(ctx); err == nil {
				for topic, ps := range l {
					for p, v := range ps {
						o.ObserveInt64(lag, v, metric.WithAttributes(attribute.String("topic", topic),
							attribute.String("partition", strconv.Itoa(int(p)))))
					}
				}
			}
		}
		if g.Ready != nil {
			v := int64(0)
			if g.Ready(ctx) {
				v = 1
			}
			o.ObserveInt64(ready, v)
		}
		return nil
	}, backlog, age, cases, lag, ready)
	if err != nil {
		return nil, fmt.Errorf("telemetry: gauges: %w", err)
	}
	return reg.Unregister, nil
}
