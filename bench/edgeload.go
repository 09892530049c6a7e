package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// edgeLoad is the load generator of an edge run: clients that POST
// /v1/records with an Idempotency-Key, a share of them retries of keys
// already answered (which must replay the first answer byte for byte) and
// a share new keys that carry a record an earlier key settled (a duplicate
// the core answers from what it stored).
type edgeLoad struct {
	url, token, tenant string
	client             *http.Client
	retryShare         float64
	dupShare           float64
	subjects           int

	mu       sync.Mutex
	keys     []*edgeKey
	records  map[string]bool // record ids sent under some key
	statuses map[string]int64
	problems []string
	next     atomic.Int64
}

// edgeKey is one Idempotency-Key and what it was answered.
type edgeKey struct {
	key, record, body string
	first             []byte // the first 200 body
}

// Requests answered by status, and the answers that break the contract.
const edgeProblemsMax = 20

func newEdgeLoad(url, tenant, token string, clients int) *edgeLoad {
	return &edgeLoad{url: url + "/v1/records", token: token, tenant: tenant, retryShare: 0.2, dupShare: 0.05, subjects: 2000,
		client:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients * 2, MaxConnsPerHost: 0}, Timeout: 60 * time.Second},
		records: map[string]bool{}, statuses: map[string]int64{}}
}

// pick returns the key of the next request: a retry of an answered key,
// or a new key (whose record may be one sent before).
func (l *edgeLoad) pick(rng *rand.Rand) *edgeKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.keys) > 0 && rng.Float64() < l.retryShare {
		if k := l.keys[rng.IntN(len(l.keys))]; k.first != nil {
			return k
		}
	}
	n := l.next.Add(1)
	rec := fmt.Sprintf("r-%d", n)
	if len(l.keys) > 0 && rng.Float64() < l.dupShare {
		rec = l.keys[rng.IntN(len(l.keys))].record
	}
	k := &edgeKey{key: fmt.Sprintf("k-%d", n), record: rec,
		body: fmt.Sprintf(`{"tenant_id":%q,"account_period":"2026-11","record_id":%q,"kind":"usage","subject":"s-%d",`+
			`"amount":"1","currency":"USD","meter":"api_calls","quantity":"1","unit":"call",`+
			`"occurred_at":"2026-11-03T10:00:00Z","finalization_version":1}`, l.tenant, rec, hashString(rec)%l.subjects)}
	l.keys = append(l.keys, k)
	l.records[rec] = true
	return k
}

func hashString(s string) int {
	h := 0
	for _, c := range []byte(s) {
		h = h*31 + int(c)
	}
	return max(h, -h) & 0x7fffffff
}

// send posts k once and records its answer; it reports whether the key
// is answered (200).
func (l *edgeLoad) send(ctx context.Context, k *edgeKey) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url, strings.NewReader(k.body))
	if err != nil {
		l.problem("%s: %v", k.key, err)
		return false
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	req.Header.Set("Idempotency-Key", k.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			l.problem("%s: %v", k.key, err)
		}
		return false
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close() // read to the end: nothing is lost if closing fails
	if err != nil {
		l.problem("%s: read the answer: %v", k.key, err)
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case resp.StatusCode == http.StatusOK:
		l.statuses["200"]++
		if resp.Header.Get("Idempotent-Replayed") == "true" {
			l.statuses["200 replayed"]++
		}
		if k.first == nil {
			k.first = body
		} else if !bytes.Equal(k.first, body) {
			l.problemLocked("%s: answered %s, earlier %s", k.key, body, k.first)
		}
		return true
	case resp.StatusCode == http.StatusConflict && bytes.Contains(body, []byte(`"busy"`)) && resp.Header.Get("Retry-After") != "":
		l.statuses["409 busy"]++
	case resp.StatusCode == http.StatusServiceUnavailable:
		l.statuses["503 unavailable"]++
	default:
		l.problemLocked("%s: answered %d %s", k.key, resp.StatusCode, body)
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
			var mine []time.Duration
			for time.Now().Before(deadline) && ctx.Err() == nil {
				k := l.pick(rng)
				t0 := time.Now()
				l.send(ctx, k)
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
			for t := range due {
				k := l.pick(rng)
				l.send(ctx, k)
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

// finish sends every key that has no 200 yet again until it has one (busy
// and unavailable answers are waited out), so that every key ends with
// its stored answer.
func (l *edgeLoad) finish(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	l.mu.Lock()
	keys := append([]*edgeKey(nil), l.keys...)
	l.mu.Unlock()
	for _, k := range keys {
		l.mu.Lock()
		done := k.first != nil
		l.mu.Unlock()
		for !done {
			if time.Now().After(deadline) {
				return fmt.Errorf("key %s still has no answer after %s", k.key, timeout)
			}
			if done = l.send(ctx, k); !done {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return nil
}
