package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
)

// edgeLoad is the load generator of an edge run: clients that POST
// /v1/records with an Idempotency-Key, a share of them retries of keys
// already answered (which must replay the first answer byte for byte) and
// a share new keys that carry a record an earlier key settled (a duplicate
// the core answers from what it stored).
type edgeLoad struct {
	host, path, token string
	tenant            string
	retryShare        float64
	dupShare          float64
	subjects          int

	mu       sync.Mutex
	keys     []edgeKey // keys[n-1] is key k-n
	records  int64     // distinct records sent under some key
	statuses map[string]int64
	problems []string
}

// edgeKey is one Idempotency-Key, k-<n>, the record it carries, r-<rec>,
// and the xxhash of its first 200 answer. It holds no pointer and no
// answer: a 150 s run sends a million keys, and with each one's answer
// (≈ 1 KB) kept the load generator's collector walked a heap of a gigabyte
// over and over on the cores the service runs on.
type edgeKey struct {
	n, rec   int64
	first    uint64 // xxhash of the first 200 body, once answered
	answered bool
}

func (k edgeKey) key() string { return fmt.Sprintf("k-%d", k.n) }

// appendBody appends the request body of k (one usage record) to b.
func (l *edgeLoad) appendBody(b []byte, k edgeKey) []byte {
	rec := fmt.Sprintf("r-%d", k.rec)
	return fmt.Appendf(b, `{"tenant_id":%q,"account_period":"2026-11","record_id":%q,"kind":"usage","subject":"s-%d",`+
		`"amount":"1","currency":"USD","meter":"api_calls","quantity":"1","unit":"call",`+
		`"occurred_at":"2026-11-03T10:00:00Z","finalization_version":1}`, l.tenant, rec, hashString(rec)%l.subjects)
}

// Requests answered by status, and the answers that break the contract.
const edgeProblemsMax = 20

func newEdgeLoad(apiURL, tenant, token string) (*edgeLoad, error) {
	u, err := url.Parse(apiURL)
	if err != nil {
		return nil, fmt.Errorf("edge load: API address: %w", err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("edge load: API address %q: want http://host:port", apiURL)
	}
	return &edgeLoad{host: u.Host, path: u.Path + "/v1/records", token: token, tenant: tenant, retryShare: 0.2, dupShare: 0.05,
		subjects: 2000, statuses: map[string]int64{}}, nil
}

// edgeConn is one client's keep-alive connection to the API. Each client
// writes its request and reads the answer (net/http's parser) on its own
// connection, as a remote client would; http.Client's pool, with two
// goroutines per connection and a hand-over on every request, spent the
// load generator's share of the two cores the service and PostgreSQL run
// on (BENCHMARKS.md, "Where the time goes").
type edgeConn struct {
	l         *edgeLoad
	c         net.Conn
	r         *bufio.Reader
	buf, body []byte
}

// edgeTimeout bounds one request, as a client's timeout would.
const edgeTimeout = 60 * time.Second

// edgeAnswer is an answer of the API, its body read.
type edgeAnswer struct {
	status int
	header http.Header
	body   []byte
}

// roundTrip sends k's request on the connection, dialling it first if it is
// closed, and returns the answer. A kept-alive connection the server closed
// while it was idle fails before any answer: the request goes again once on
// a new one, as http.Client does for a request with an Idempotency-Key.
func (c *edgeConn) roundTrip(ctx context.Context, k edgeKey) (edgeAnswer, error) {
	c.body = c.l.appendBody(c.body[:0], k)
	c.buf = fmt.Appendf(c.buf[:0], "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nIdempotency-Key: k-%d\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", c.l.path, c.l.host, c.l.token, k.n, len(c.body), c.body)
	for reused := c.c != nil; ; reused = false {
		if c.c == nil {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", c.l.host)
			if err != nil {
				return edgeAnswer{}, err
			}
			c.c, c.r = conn, bufio.NewReader(conn)
		}
		a, closing, err := c.exchange()
		if err != nil || closing {
			c.close()
		}
		if err != nil && reused && a.status == 0 {
			continue
		}
		return a, err
	}
}

// exchange writes the request in buf and reads the answer; closing: the
// server closes the connection after it.
func (c *edgeConn) exchange() (a edgeAnswer, closing bool, err error) {
	if err := c.c.SetDeadline(time.Now().Add(edgeTimeout)); err != nil {
		return a, false, err
	}
	if _, err := c.c.Write(c.buf); err != nil {
		return a, false, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return a, false, err
	}
	a.status, a.header = resp.StatusCode, resp.Header
	a.body, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close() // read to the end: nothing is lost if closing fails
	if err != nil {
		return a, false, fmt.Errorf("read the answer: %w", err)
	}
	return a, resp.Close, nil
}

func (c *edgeConn) close() {
	if c.c != nil {
		_ = c.c.Close() // a connection given up: nothing to flush
		c.c, c.r = nil, nil
	}
}

// pick returns the key of the next request: a retry of an answered key,
// or a new key (whose record may be one sent before).
func (l *edgeLoad) pick(rng *rand.Rand) edgeKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.keys) > 0 && rng.Float64() < l.retryShare {
		if k := l.keys[rng.IntN(len(l.keys))]; k.answered {
			return k
		}
	}
	n := int64(len(l.keys)) + 1
	k := edgeKey{n: n, rec: n}
	if len(l.keys) > 0 && rng.Float64() < l.dupShare {
		k.rec = l.keys[rng.IntN(len(l.keys))].rec
	} else {
		l.records++
	}
	l.keys = append(l.keys, k)
	return k
}

func hashString(s string) int {
	h := 0
	for _, c := range []byte(s) {
		h = h*31 + int(c)
	}
	return max(h, -h) & 0x7fffffff
}

// send posts k once on c and records its answer; it reports whether the
// key is answered (200).
func (l *edgeLoad) send(ctx context.Context, c *edgeConn, k edgeKey) bool {
	a, err := c.roundTrip(ctx, k)
	if err != nil {
		if ctx.Err() == nil {
			l.problem("%s: %v", k.key(), err)
		}
		return false
	}
	sum := xxhash.Sum64(a.body)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case a.status == http.StatusOK:
		l.statuses["200"]++
		if a.header.Get("Idempotent-Replayed") == "true" {
			l.statuses["200 replayed"]++
		}
		kept := &l.keys[k.n-1]
		if !kept.answered {
			kept.first, kept.answered = sum, true
		} else if kept.first != sum {
			l.problemLocked("%s: answered %s, which differs from its first answer (xxhash %016x)", k.key(), a.body, kept.first)
		}
		return true
	case a.status == http.StatusConflict && bytes.Contains(a.body, []byte(`"busy"`)) && a.header.Get("Retry-After") != "":
		l.statuses["409 busy"]++
	case a.status == http.StatusServiceUnavailable:
		l.statuses["503 unavailable"]++
	default:
		l.problemLocked("%s: answered %d %s", k.key(), a.status, a.body)
	}
	return false
}

func (l *edgeLoad) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problemLocked(format, args...)
}

func (l *edgeLoad) problemLocked(format string, args ...any) {
	if len(l.problems) < edgeProblemsMax {
		l.problems = append(l.problems, fmt.Sprintf(format, args...))
	}
}

// saturate runs clients closed-loop for d and returns requests/s and the
// latencies.
func (l *edgeLoad) saturate(ctx context.Context, clients int, d time.Duration, seed uint64) (float64, []time.Duration) {
	var mu sync.Mutex
	var lats []time.Duration
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			conn := &edgeConn{l: l}
			defer conn.close()
			var mine []time.Duration
			for time.Now().Before(deadline) && ctx.Err() == nil {
				k := l.pick(rng)
				t0 := time.Now()
				l.send(ctx, conn, k)
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return float64(len(lats)) / time.Since(start).Seconds(), lats
}

// paced offers rate requests/s for d (open loop, up to clients at once) and
// returns the latencies, each from the moment its request was due: a
// request that waited for a free client counts its wait.
func (l *edgeLoad) paced(ctx context.Context, clients int, rate float64, d time.Duration, seed uint64) []time.Duration {
	n := int(rate * d.Seconds())
	due := make(chan time.Time, n)
	var mu sync.Mutex
	lats := make([]time.Duration, 0, n)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			conn := &edgeConn{l: l}
			defer conn.close()
			for t := range due {
				k := l.pick(rng)
				l.send(ctx, conn, k)
				lat := time.Since(t)
				mu.Lock()
				lats = append(lats, lat)
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	for i := range n {
		t := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if w := time.Until(t); w > 0 {
			select {
			case <-time.After(w):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		due <- t
	}
	close(due)
	wg.Wait()
	return lats
}

// answerCheck holds the answers the database stored for an edge run's
// keys against the first answers their clients were given.
type answerCheck struct {
	keys    []edgeKey
	matched []bool
	stored  int // answers stored, for any key
}

func newAnswerCheck(keys []edgeKey) *answerCheck {
	return &answerCheck{keys: keys, matched: make([]bool, len(keys))}
}

// add takes the answer stored for key.
func (a *answerCheck) add(key string, resp []byte) {
	a.stored++
	n, err := strconv.ParseInt(strings.TrimPrefix(key, "k-"), 10, 64)
	if err == nil && n >= 1 && n <= int64(len(a.keys)) {
		k := a.keys[n-1]
		a.matched[n-1] = k.answered && k.first == xxhash.Sum64(resp)
	}
}

// bad lists the keys stored without their clients' answer, or not stored.
func (a *answerCheck) bad() []string {
	var bad []string
	for i, ok := range a.matched {
		if !ok {
			bad = append(bad, a.keys[i].key())
		}
	}
	return bad
}

// finish sends every key that has no 200 yet again until it has one (busy
// and unavailable answers are waited out), so that every key ends with
// its stored answer.
func (l *edgeLoad) finish(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	conn := &edgeConn{l: l}
	defer conn.close()
	l.mu.Lock()
	keys := append([]edgeKey(nil), l.keys...)
	l.mu.Unlock()
	for _, k := range keys {
		l.mu.Lock()
		done := l.keys[k.n-1].answered
		l.mu.Unlock()
		for !done {
			if time.Now().After(deadline) {
				return fmt.Errorf("key %s still has no answer after %s", k.key(), timeout)
			}
			if done = l.send(ctx, conn, k); !done {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return nil
}
