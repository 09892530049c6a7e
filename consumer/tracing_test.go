package consumer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/relay"
	"github.com/settlehq/settle/relay/outbox"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/settletest"
	"github.com/settlehq/settle/telemetry"
)

// TestTraceFollowsRecord: a record produced with a W3C traceparent is
// settled in a span that is the producer span's child; its result and its
// settlement go out naming spans of the same trace, the settlement's a
// relay publish span whose parent is the settle span — one trace from the
// metering producer to finance's topic.
func TestTraceFollowsRecord(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 1)
	s := settletest.NewStore(t, settle.Config{})
	rec := tracetest.NewSpanRecorder()
	tel, err := telemetry.NewForTest(rec)
	if err != nil {
		t.Fatal(err)
	}
	tp := tel.TracerProvider()

	// The producer's span.
	pctx, pspan := tp.Tracer("test-producer").Start(context.Background(), "produce usage")
	in := &kgo.Record{Topic: "usage", Key: []byte("acme/cust-1"), Value: usage("record_id", "traced-1")}
	telemetry.Inject(pctx, in)
	pspan.End()
	producer := pspan.SpanContext()
	k.Produce(t, in)

	cfg := consumerConfig(t, k, "traced")
	cfg.TracerProvider, cfg.Metrics = tp, tel.Metrics
	_, stopConsumer := runConsumer(t, s, cfg)
	r, err := relay.New(outbox.New(s), relay.Config{Brokers: k.Brokers, StandbyInterval: 50 * time.Millisecond,
		Logger: testLogger(t), TracerProvider: tp, Metrics: tel.Metrics})
	if err != nil {
		t.Fatal(err)
	}
	stopRelay := testnet.Background(t, r.Run)

	res := k.Read(t, "usage.results", 1, 20*time.Second)
	set := k.Read(t, "settlements", 1, 20*time.Second)
	stopConsumer()
	stopRelay()
	if len(res) != 1 || len(set) != 1 {
		t.Fatalf("%d results, %d settlements", len(res), len(set))
	}
	traceOf := func(r *kgo.Record) trace.SpanContext {
		return trace.SpanContextFromContext(telemetry.Extract(context.Background(), r))
	}
	var settleSpan, publishSpan sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		switch {
		case strings.HasPrefix(sp.Name(), "settle "):
			settleSpan = sp
		case strings.HasPrefix(sp.Name(), "publish settlements"):
			publishSpan = sp
		}
	}
	if settleSpan == nil || publishSpan == nil {
		t.Fatalf("spans recorded: settle %v, publish %v", settleSpan != nil, publishSpan != nil)
	}
	if settleSpan.Parent().SpanID() != producer.SpanID() || settleSpan.SpanContext().TraceID() != producer.TraceID() {
		t.Errorf("settle span's parent %s, want the producer's span %s", settleSpan.Parent().SpanID(), producer.SpanID())
	}
	if publishSpan.Parent().SpanID() != settleSpan.SpanContext().SpanID() {
		t.Errorf("publish span's parent %s, want the settle span %s", publishSpan.Parent().SpanID(), settleSpan.SpanContext().SpanID())
	}
	if got := traceOf(res[0]); got.SpanID() != settleSpan.SpanContext().SpanID() {
		t.Errorf("result names span %s, want the settle span %s", got.SpanID(), settleSpan.SpanContext().SpanID())
	}
	if got := traceOf(set[0]); got.TraceID() != producer.TraceID() || got.SpanID() != publishSpan.SpanContext().SpanID() {
		t.Errorf("settlement names %s/%s, want trace %s span %s", got.TraceID(), got.SpanID(), producer.TraceID(), publishSpan.SpanContext().SpanID())
	}
}
