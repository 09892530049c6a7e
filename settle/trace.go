package settle

import "github.com/settlehq/settle/record"

// traceHeaders returns the W3C trace-context headers (traceparent,
// tracestate) of an input record, so that its settlement carries the same
// trace to the settlements topic. The consumer rewrites them to name its
// own span for the record; settle only copies them and never reads them.
func traceHeaders(hs []record.Header) []record.Header {
	var out []record.Header
	for _, h := range hs {
		if h.Key == "traceparent" || h.Key == "tracestate" {
			out = append(out, h)
		}
	}
	return out
}
