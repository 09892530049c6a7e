package consumer

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/settlehq/settle/internal/kafkahdr"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/telemetry"
)

// traceHeaders are the W3C headers a record's span context travels in.
var traceHeaders = map[string]bool{"traceparent": true, "tracestate": true}

// startSpans starts one span per record, a child of the trace context in
// the record's headers, and rewrites the input's trace headers to name that
// span: the settling transaction copies them onto the record's settlement,
// so the relay's publish span continues the same trace. It returns nil
// when no tracer provider is configured.
func (c *Consumer) startSpans(ctx context.Context, recs []*kgo.Record, ins []message.Input) []trace.Span {
	tp := c.cfg.TracerProvider
	if tp == nil {
		return nil
	}
	tracer := tp.Tracer("github.com/settlehq/settle/consumer")
	spans := make([]trace.Span, len(recs))
	for i, r := range recs {
		parent := telemetry.Extract(ctx, r)
		sctx, span := tracer.Start(parent, "settle "+r.Topic, trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(attribute.String("messaging.system", "kafka"),
				attribute.String("messaging.destination.name", r.Topic),
				attribute.Int("messaging.destination.partition.id", int(r.Partition)),
				attribute.Int64("messaging.kafka.offset", r.Offset),
				attribute.String("messaging.consumer.group.name", c.cfg.Group)))
		spans[i] = span
		if !span.SpanContext().IsValid() {
			continue
		}
		carrier := &kgo.Record{}
		telemetry.Inject(sctx, carrier)
		hs := make([]record.Header, 0, len(ins[i].Headers)+2)
		for _, h := range ins[i].Headers {
			if !traceHeaders[h.Key] {
				hs = append(hs, h)
			}
		}
		for _, h := range kafkahdr.FromKafka(carrier.Headers) {
			if traceHeaders[h.Key] {
				hs = append(hs, h)
			}
		}
		ins[i].Headers = hs
	}
	return spans
}

// injectResult puts span's context in the result record's headers.
func injectResult(span trace.Span, r *kgo.Record) {
	if span == nil || !span.SpanContext().IsValid() {
		return
	}
	telemetry.Inject(trace.ContextWithSpan(context.Background(), span), r)
}

// endSpans ends the spans of a batch: those with a result get its outcome,
// the rest the error that stopped the batch (they are read again).
func endSpans(spans []trace.Span, results []message.Result, err error) {
	for i, span := range spans {
		if i < len(results) {
			span.SetAttributes(attribute.String("settle.outcome", string(results[i].Outcome)),
				attribute.String("settle.reason", results[i].Reason))
		} else if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
