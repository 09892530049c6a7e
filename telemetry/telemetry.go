package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Config configures Telemetry. The zero value is a documented default:
// metrics on, traces off.
type Config struct {
	// ServiceName names the service in resource attributes. "" = "settle".
	ServiceName string

	// ServiceInstance names this process (pod name, host). "" = none.
	ServiceInstance string

	// OTLPEndpoint, when set, exports traces over OTLP/HTTP to this URL
	// (e.g. http://otel-collector:4318). "" = traces are propagated in
	// headers but not exported.
	OTLPEndpoint string

	// TraceSampleRatio is the share of new traces sampled (a record that
	// arrives with a sampled parent is always sampled). 0 = 1.0.
	TraceSampleRatio float64
}

// Validate reports the first setting that cannot work, saying how to fix it.
func (c Config) Validate() error {
	if c.OTLPEndpoint != "" {
		u, err := url.Parse(c.OTLPEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("telemetry: OTLP endpoint %q: want an http:// or https:// URL such as http://otel-collector:4318 (--otlp-endpoint or OTEL_EXPORTER_OTLP_ENDPOINT)", c.OTLPEndpoint)
		}
	}
	if c.TraceSampleRatio < 0 || c.TraceSampleRatio > 1 {
		return fmt.Errorf("telemetry: trace sample ratio %g: must be between 0 and 1 (0 = 1)", c.TraceSampleRatio)
	}
	return nil
}

// Telemetry is the process's meter and tracer providers and the Prometheus
// handler. Create it with New and Shutdown it at exit.
type Telemetry struct {
	// Metrics are the named instruments.
	Metrics *Metrics

	meterProvider  *sdkmetric.MeterProvider
	tracerProvider trace.TracerProvider
	traceShutdown  func(context.Context) error
	registry       *promclient.Registry
}

// New builds the providers. Metrics go to a private Prometheus registry
// (served by Handler), never to the global one, so two pipelines in one
// test process do not mix their series.
func New(ctx context.Context, cfg Config) (*Telemetry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = "settle"
	}
	if cfg.TraceSampleRatio == 0 {
		cfg.TraceSampleRatio = 1
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if cfg.ServiceInstance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", cfg.ServiceInstance))
	}
	res := resource.NewSchemaless(attrs...)

	reg := promclient.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(exp),
		sdkmetric.WithView(histogramViews()...))
	m, err := NewMetrics(mp)
	if err != nil {
		return nil, err
	}
	t := &Telemetry{Metrics: m, meterProvider: mp, registry: reg,
		traceShutdown: func(context.Context) error { return nil }}
	if cfg.OTLPEndpoint != "" {
		te, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.OTLPEndpoint))
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP trace exporter for %s: %w", cfg.OTLPEndpoint, err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(te),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.TraceSampleRatio))))
		t.tracerProvider, t.traceShutdown = tp, tp.Shutdown
	}
	return t, nil
}

// NewForTest returns Telemetry with an in-memory tracer provider (spans are
// recorded and sampled, not exported) for tests that follow a trace.
func NewForTest(sp sdktrace.SpanProcessor) (*Telemetry, error) {
	t, err := New(context.Background(), Config{})
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.tracerProvider, t.traceShutdown = tp, tp.Shutdown
	return t, nil
}

// Handler serves the metrics in the Prometheus text format.
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{Timeout: 10 * time.Second})
}

// MeterProvider is the provider metrics are recorded with.
func (t *Telemetry) MeterProvider() metric.MeterProvider { return t.meterProvider }

// TracerProvider is the provider spans are started with. It is nil when
// traces are off (no OTLP endpoint): the consumer and the
// relay then skip span work per record instead of feeding a no-op tracer.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tracerProvider }

// propagator is built once: Extract and Inject run per record.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Propagator is the W3C trace-context propagator used on Kafka headers.
func Propagator() propagation.TextMapPropagator { return propagator }

// Shutdown flushes pending spans and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return errors.Join(t.traceShutdown(ctx), t.meterProvider.Shutdown(ctx))
}
