package relay

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/settlehq/settle/relay/outbox"
	"github.com/settlehq/settle/telemetry"
)

// startSpans starts a producer span for every record that carries a trace
// context and rewrites its trace headers to name the span. Records without
// one get no span: a span with no parent would start a trace nobody asked
// for, once per settlement.
func (r *Relay) startSpans(ctx context.Context, recs []*kgo.Record) []trace.Span {
	if r.cfg.TracerProvider == nil {
		return nil
	}
	tracer := r.cfg.TracerProvider.Tracer("github.com/settlehq/settle/relay")
	spans := make([]trace.Span, len(recs))
	for i, rec := range recs {
		parent := telemetry.Extract(ctx, rec)
		if !trace.SpanContextFromContext(parent).IsValid() {
			continue
		}
		sctx, span := tracer.Start(parent, "publish "+rec.Topic, trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attribute.String("messaging.system", "kafka"),
				attribute.String("messaging.destination.name", rec.Topic)))
		telemetry.Inject(sctx, rec)
		spans[i] = span
	}
	return spans
}

// endSpans ends the spans of startSpans; errs are the records' produce
// errors, in the same order.
func endSpans(spans []trace.Span, errs []error) {
	for i, span := range spans {
		if span == nil {
			continue
		}
		if i < len(errs) && errs[i] != nil {
			span.SetStatus(codes.Error, errs[i].Error())
		}
		span.End()
	}
}

// countPublished counts the published messages by topic.
func (r *Relay) countPublished(ctx context.Context, msgs []outbox.Message) {
	if r.cfg.Metrics == nil {
		return
	}
	by := map[string]int{}
	for _, m := range msgs {
		by[m.Topic]++
	}
	for topic, n := range by {
		r.cfg.Metrics.Published(ctx, topic, n)
	}
}

// countParked counts the parked messages by reason.
func (r *Relay) countParked(ctx context.Context, parks []outbox.Park) {
	if r.cfg.Metrics == nil {
		return
	}
	by := map[string]int{}
	for _, p := range parks {
		by[p.Reason]++
	}
	for reason, n := range by {
		r.cfg.Metrics.Parked(ctx, reason, n)
	}
}
