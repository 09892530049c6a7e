package telemetry

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
)

// RecordCarrier carries W3C trace context (traceparent, tracestate,
// baggage) in a Kafka record's headers.
type RecordCarrier struct{ R *kgo.Record }

var _ propagation.TextMapCarrier = RecordCarrier{}

// Get returns the value of the first header named key.
func (c RecordCarrier) Get(key string) string {
	for _, h := range c.R.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Set replaces the header named key (or appends it).
func (c RecordCarrier) Set(key, value string) {
	for i, h := range c.R.Headers {
		if h.Key == key {
			c.R.Headers[i].Value = []byte(value)
			return
		}
	}
	c.R.Headers = append(c.R.Headers, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

// Keys lists the header names.
func (c RecordCarrier) Keys() []string {
	out := make([]string, len(c.R.Headers))
	for i, h := range c.R.Headers {
		out[i] = h.Key
	}
	return out
}

// Extract returns ctx with the trace context r's headers carry.
func Extract(ctx context.Context, r *kgo.Record) context.Context {
	return Propagator().Extract(ctx, RecordCarrier{r})
}

// Inject writes ctx's trace context into r's headers.
func Inject(ctx context.Context, r *kgo.Record) {
	Propagator().Inject(ctx, RecordCarrier{r})
}
