package ingest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settlehq/settle/edge/edgetest"
)

// TestLoad drives the API on loopback with 16 clients, 30% of requests
// retries of earlier keys and some same-key races, bounded in count and
// time (SETTLE_EDGE_LOAD_REQUESTS, default 3000; SETTLE_EDGE_LOAD_SECONDS,
// default 6). It asserts zero double effects, that every 200 is the key's
// stored answer, and that every other answer is an honest busy or
// unavailable; it prints throughput and latency (BENCHMARKS.md, "Other
// figures").
func TestLoad(t *testing.T) {
	requestsMax := int64(envInt("SETTLE_EDGE_LOAD_REQUESTS", 3000))
	duration := time.Duration(envInt("SETTLE_EDGE_LOAD_SECONDS", 6)) * time.Second
	const (
		clients    = 16
		retryShare = 0.30
		raceShare  = 0.05 // of new keys: sent by 3 goroutines at once
		subjects   = 50
	)
	s, srv := newAPIConns(t, Config{}, nil, 20)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	srv.Client().Transport = client.Transport

	type keyState struct {
		key, body string
		amount    int
		first     []byte // the first 200 body seen
	}
	var (
		mu        sync.Mutex
		keys      []*keyState
		latencies []time.Duration
		statuses  = map[string]int{}
		problems  []string
	)
	var issued, newKeys atomic.Int64
	deadline := time.Now().Add(duration)

	send := func(k *keyState) {
		t0 := time.Now()
		r := post(srv, tokenAcme, k.key, k.body)
		lat := time.Since(t0)
		mu.Lock()
		defer mu.Unlock()
		latencies = append(latencies, lat)
		switch {
		case r.err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", k.key, r.err))
		case r.status == http.StatusOK:
			statuses["200"]++
			if k.first == nil {
				k.first = r.body
			} else if !bytes.Equal(k.first, r.body) {
				problems = append(problems, fmt.Sprintf("%s: answered %s, earlier %s", k.key, r.body, k.first))
			}
		case r.status == http.StatusConflict && r.code() == CodeBusy && r.header.Get("Retry-After") != "":
			statuses["409 busy"]++
		case r.status == http.StatusServiceUnavailable && r.code() == CodeUnavailable:
			statuses["503 unavailable"]++
		default:
			problems = append(problems, fmt.Sprintf("%s: dishonest answer %d %s", k.key, r.status, r.body))
		}
	}

	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 9))
			for issued.Add(1) <= requestsMax && time.Now().Before(deadline) {
				mu.Lock()
				var k *keyState
				if len(keys) > 0 && rng.Float64() < retryShare {
					k = keys[rng.IntN(len(keys))]
				}
				mu.Unlock()
				if k != nil {
					send(k)
					continue
				}
				n := newKeys.Add(1)
				amount := 1 + rng.IntN(99)
				k = &keyState{key: fmt.Sprintf("load-%d", n), amount: amount,
					body: usage("acme", fmt.Sprintf("lu-%d", n), fmt.Sprintf("s-%d", rng.IntN(subjects)), strconv.Itoa(amount))}
				mu.Lock()
				keys = append(keys, k)
				mu.Unlock()
				if rng.Float64() < raceShare {
					issued.Add(2)
					var race sync.WaitGroup
					for range 3 {
						race.Go(func() { send(k) })
					}
					race.Wait()
					continue
				}
				send(k)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, p := range problems[:min(len(problems), 10)] {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Fatalf("%d problems", len(problems))
	}

	// Every key ends answered with its stored response, the same as any 200
	// it gave during the run.
	total := 0
	for _, k := range keys {
		r := postUntilAnswered(t, srv, tokenAcme, k.key, k.body)
		stored := storedResponse(t, s, k.key)
		if r.status != http.StatusOK || !bytes.Equal(r.body, stored) || (k.first != nil && !bytes.Equal(k.first, stored)) {
			t.Fatalf("%s: final %d %s, stored %s, first %s", k.key, r.status, r.body, stored, k.first)
		}
		total += k.amount
	}
	// Zero double effects: one identity and one ledger row per key, and the
	// balances add up to the charges.
	if got := edgetest.Count(t, s, `SELECT count(*)::int FROM (SELECT identity_id FROM ledger_entries GROUP BY identity_id HAVING count(*) > 1) d`); got != 0 {
		t.Fatalf("%d identities with more than one ledger row", got)
	}
	if got := edgetest.Count(t, s, `SELECT count(*)::int FROM ledger_entries`); got != len(keys) {
		t.Fatalf("ledger rows = %d, keys = %d", got, len(keys))
	}
	if got := edgetest.Count(t, s, `SELECT count(*)::int FROM idempotency_keys WHERE status = 'done'`); got != len(keys) {
		t.Fatalf("done keys = %d, keys = %d", got, len(keys))
	}
	if got := edgetest.Count(t, s, `SELECT (-sum(balance))::int FROM account_states WHERE tenant_id = 'acme'`); got != total {
		t.Fatalf("charged %d, want %d", got, total)
	}

	slices.Sort(latencies)
	q := func(p float64) time.Duration { return latencies[min(len(latencies)-1, int(float64(len(latencies))*p))] }
	line := fmt.Sprintf("HTTP edge load: %d requests (%d keys, %d clients) in %.2fs = %.0f req/s; latency p50 %s p99 %s max %s; answers %v",
		len(latencies), len(keys), clients, elapsed.Seconds(), float64(len(latencies))/elapsed.Seconds(),
		q(0.50).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), latencies[len(latencies)-1].Round(10*time.Microsecond), statuses)
	t.Log(line)
	fmt.Println(line)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
