package analyst

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ReadsMaxDefault is Config.ReadsMax's zero value.
const ReadsMaxDefault = 4

// readQueueWait is how long a read waits for one of the ReadsMax slots
// before it is answered "busy, retry": long enough to ride out a burst,
// short enough that no one queues without end.
const readQueueWait = 250 * time.Millisecond

// limitReads lets at most Config.ReadsMax reads (GET and HEAD, but the
// static files and the API description, which read no database) run at
// once; one more waits readQueueWait for a slot, then gets 503 with
// Retry-After. The database connections the reads can take are bounded
// by it whatever the pool, and an analyst looping on the heaviest page
// cannot queue the others, or the settling path's work, behind it.
func (h *handler) limitReads(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method != http.MethodGet && r.Method != http.MethodHead) ||
			strings.HasPrefix(r.URL.Path, "/static/") || r.URL.Path == "/api/openapi.json" {
			next.ServeHTTP(w, r)
			return
		}
		t := time.NewTimer(readQueueWait)
		select {
		case h.reads <- struct{}{}:
			t.Stop()
		case <-t.C:
			w.Header().Set("Retry-After", "1")
			h.fail(w, r, fmt.Errorf("%w: %d reads of the analysts' page and API are running, the most at once; retry in a second",
				errBusy, cap(h.reads)), strings.HasPrefix(r.URL.Path, "/api/"))
			return
		case <-r.Context().Done():
			t.Stop()
			return // the client went away while waiting
		}
		defer func() { <-h.reads }()
		next.ServeHTTP(w, r)
	})
}

// errBusy is the answer when the reads' slots are all taken: retry.
var errBusy = errors.New("busy")
