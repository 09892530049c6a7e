package settle

import "github.com/settlehq/settle/fingerprint"

// traceHeaders returns the W3C trace-context headers (traceparent,
// tracestate) of an input record, so that its settlement carries the same
// trace to the settlements topic. The consumer rewrites them to name its
// own span for the record; settle only copies them and never reads them.
func traceHeaders(hs []fingerprint.Header) []fingerprint.Header {
	var out []fingerprint.Header
	for _, h := range hs {
		if h.Key == "traceparent" || h.Key == "tracestate" {
			out = append(out, h)
		}
	}
	return out
}
