package analyst_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/settlehq/settle/analyst"
)

// lockedBuffer is a log sink the server's goroutines write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBadBytesInParameters: on every route of the surface (read off its
// router), a path value or a query parameter that is not UTF-8 or holds a
// NUL (tenant=%00, q=%ff, ...) is a 400 that names the parameter; no body
// carries the database's error text (SQLSTATE, "invalid byte sequence")
// and no ERROR is logged for the client's mistake. The JSON resolve's
// fields are held to the same rule.
func TestBadBytesInParameters(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var logs lockedBuffer
	cfg := analyst.Config{Store: analyst.StoreOf(f.store), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	srv := httptest.NewServer(analyst.Handler(cfg))
	t.Cleanup(srv.Close)

	wildcard := regexp.MustCompile(`\{([a-z_]+)(\.\.\.)?\}`)
	leak := regexp.MustCompile(`(?i)sqlstate|invalid byte sequence|encoding "UTF8"|pq:|ERROR:`)
	type call struct{ method, path, name string }
	var calls []call
	for _, p := range analyst.RoutePatterns(cfg) {
		method, path, _ := strings.Cut(p, " ")
		path = strings.TrimSuffix(path, "{$}")
		if strings.HasSuffix(path, "/") && path != "/" {
			path += "x" // a subtree (/static/): one file under it
		}
		good := wildcard.ReplaceAllStringFunc(path, func(string) string { return "1" })
		// Each wildcard in turn gets the bad bytes, the others a good value.
		for _, m := range wildcard.FindAllStringSubmatchIndex(path, -1) {
			name := path[m[2]:m[3]]
			for _, bad := range []string{"%00", "%ff", "a%00b"} {
				p := wildcard.ReplaceAllStringFunc(path[:m[0]], func(string) string { return "1" }) + bad +
					wildcard.ReplaceAllStringFunc(path[m[1]:], func(string) string { return "1" })
				calls = append(calls, call{method, p, name})
			}
		}
		for _, q := range []string{"tenant=%00", "q=%ff", "period=2026-11%00", "subject=%c3%28", "reason=x%00", "id=%00"} {
			calls = append(calls, call{method, good + "?" + q, strings.Split(q, "=")[0]})
		}
	}
	if len(calls) < 100 {
		t.Fatalf("only %d calls: the route list is not being read", len(calls))
	}
	for _, c := range calls {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader("decision=accept&reason=x&by=y"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), c.name) || leak.Match(body) {
			t.Errorf("%s %s: %d, want 400 naming %q without the database's text: %.300s", c.method, c.path, resp.StatusCode, c.name, body)
		}
	}
	for _, b := range []string{`{"decision":"accept","reason":"a\u0000b","by":"ann"}`, `{"decision":"reject","reason":"ok","by":"\u0000"}`} {
		req, _ := http.NewRequest("POST", srv.URL+"/api/cases/"+itoa(f.acmeCase)+"/resolve", strings.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "NUL") || leak.Match(body) {
			t.Errorf("resolve %s: %d %.300s, want 400 naming the NUL", b, resp.StatusCode, body)
		}
	}
	if l := logs.String(); strings.Contains(l, "level=ERROR") {
		t.Errorf("a client's bad bytes logged an ERROR:\n%.2000s", l)
	}
}
