package settle

import "github.com/settlehq/settle/record"

// traceHeaderBytesMax caps a trace-context header a settlement carries:
// a traceparent is 55 bytes, and W3C asks that at least 512 of a
// tracestate be passed on.
const traceHeaderBytesMax = 512

// traceHeaders returns the W3C trace-context headers (traceparent,
// tracestate) of an input record, so that its settlement carries the same
// trace to the settlements topic. The consumer rewrites them to name its
// own span for the record; settle only copies them and never reads them.
// One over traceHeaderBytesMax is left out: it could make the settlement's
// message more than the broker takes, parking it away from finance.
func traceHeaders(hs []record.Header) []record.Header {
	var out []record.Header
	for _, h := range hs {
		if (h.Key == "traceparent" || h.Key == "tracestate") && len(h.Value) <= traceHeaderBytesMax {
			out = append(out, h)
		}
	}
	return out
}
