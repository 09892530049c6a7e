package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/settlehq/settle/telemetry"
)

// TestConfigValidate: an OTLP endpoint that is not an http(s) URL and a
// sample ratio outside 0..1 are refused with what to give instead.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  telemetry.Config
		want string
	}{
		{telemetry.Config{}, ""},
		{telemetry.Config{OTLPEndpoint: "http://collector:4318"}, ""},
		{telemetry.Config{OTLPEndpoint: "collector:4318"}, "want an http:// or https:// URL"},
		{telemetry.Config{TraceSampleRatio: 2}, "between 0 and 1"},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// TestRecordCarrierRoundTrip: a span context injected into a record's
// headers is extracted unchanged, an existing traceparent is replaced (not
// duplicated), and other headers are kept.
func TestRecordCarrierRoundTrip(t *testing.T) {
	t.Parallel()
	tel, err := telemetry.NewForTest(tracetest.NewSpanRecorder())
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := tel.TracerProvider().Tracer("t").Start(context.Background(), "x")
	defer span.End()
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "origin", Value: []byte("test")}, {Key: "traceparent", Value: []byte("stale")}}}
	telemetry.Inject(ctx, r)
	got := trace.SpanContextFromContext(telemetry.Extract(context.Background(), r))
	if !got.Equal(span.SpanContext().WithRemote(true)) {
		t.Errorf("extracted %v, want %v", got, span.SpanContext())
	}
	n := 0
	for _, h := range r.Headers {
		if h.Key == "traceparent" {
			n++
		}
	}
	if n != 1 || r.Headers[0].Key != "origin" {
		t.Errorf("headers after inject: %v", r.Headers)
	}
}

// TestNilMetricsAreNoOps: packages run without telemetry in tests.
func TestNilMetricsAreNoOps(t *testing.T) {
	var m *telemetry.Metrics
	m.Record(context.Background(), "settled", "usage", "", 1)
	m.Retry(context.Background(), telemetry.CauseContention)
	if _, err := m.RegisterGauges(telemetry.Gauges{}); err != nil {
		t.Fatal(err)
	}
}
