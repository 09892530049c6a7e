package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/reconcile"
)

const edgeKillToken = "e2e-edge-kill-token-0123456789"

// edgeKey is one Idempotency-Key of the edge kill test and the first 200
// it was answered.
type edgeKey struct {
	key, body string
	first     []byte
}

// TestEdgeKillMidGroup SIGKILLs `settle run` while 32 clients post to its
// records API, at the commit point of a group's transaction (before_commit:
// nothing of the group written; after_commit: the group's keys, records
// and answers written, none of the answers sent), four times, restarting
// it after each kill. After every kill each key is done or absent, never
// in progress, and reconcile finds no record settled twice; at the end
// every key, retried, is done with one stored answer, the same as any 200
// it gave before, and each record has exactly one identity and one ledger
// row.
// Seen failing with answers stored before the work: 161 identities for 218
// keys.
func TestEdgeKillMidGroup(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 1)
	url := emptyDatabase(t)
	migrateDB(t, url)
	pool := openPool(t, url)
	store, err := settle.Open(context.Background(), pool, settle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	var (
		mu   sync.Mutex
		keys []*edgeKey
	)
	start := func(name, crashAt string) (*instance, string) {
		admin, api := testnet.FreeAddr(t), testnet.FreeAddr(t)
		var env []string
		if crashAt != "" {
			env = []string{"SETTLE_CRASH_AT=" + crashAt}
		}
		p := startSettle(t, name, env, "run", "--database-url", url, "--brokers", strings.Join(k.Brokers, ","),
			"--admin-addr", admin, "--api-addr", api, "--api-token", "acme="+edgeKillToken,
			"--session-timeout", "2s", "--pool-max-conns", "8")
		inst := &instance{Process: p, admin: admin}
		testnet.WaitFor(t, name+" ready", time.Minute, func() bool {
			ready, _ := inst.readiness()
			return ready || inst.Exited()
		})
		return inst, "http://" + api + "/v1/records"
	}
	points := []string{"after_commit@3", "before_commit@4", "after_commit@6", "before_commit@2"}
	for round, point := range points {
		inst, api := start(fmt.Sprintf("run-%d", round), point)
		var wg sync.WaitGroup
		for c := range 32 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(c)))
				for !inst.Exited() {
					mu.Lock()
					var ek *edgeKey
					if len(keys) > 0 && rng.IntN(4) == 0 {
						ek = keys[rng.IntN(len(keys))] // a retry
					} else {
						n := len(keys)
						ek = &edgeKey{key: fmt.Sprintf("k-%d", n), body: usageBody(fmt.Sprintf("r-%d", n), fmt.Sprintf("s-%d", n%7))}
						keys = append(keys, ek)
					}
					mu.Unlock()
					postKey(t, cl, api, ek, &mu)
				}
			})
		}
		if code := inst.ExitCode(time.Minute); code == 0 {
			t.Fatalf("round %d: settle run was not killed at %s", round, point)
		}
		if at := crashedAt(inst.Log()); at == "" {
			t.Fatalf("round %d: settle run exited without its crash point:\n%s", round, inst.Log())
		}
		wg.Wait()
		checkEdgeKeys(t, store, len(keys), false)
	}
	inst, api := start("final", "")
	for _, ek := range keys {
		deadline := time.Now().Add(time.Minute)
		for !postKey(t, cl, api, ek, &mu) {
			if time.Now().After(deadline) {
				t.Fatalf("key %s never answered 200", ek.key)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	inst.stop(t)
	checkEdgeKeys(t, store, len(keys), true)
	answers := map[reconcile.KeyRef][]byte{}
	for _, ek := range keys {
		answers[reconcile.KeyRef{TenantID: "acme", Key: ek.key}] = ek.first
	}
	if rep, err := reconcile.Run(context.Background(), store, reconcile.Input{KeyAnswers: answers}); err != nil {
		t.Fatal(err)
	} else if !rep.Clean() {
		t.Fatalf("the stored answers are not the ones the clients got: %+v", rep.Findings[:min(5, len(rep.Findings))])
	}
	totals, err := reconcile.Count(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	if totals.Identities != int64(len(keys)) || totals.Entries != int64(len(keys)) {
		t.Fatalf("%d keys (one record each): %d identities, %d ledger rows", len(keys), totals.Identities, totals.Entries)
	}
	t.Logf("%d keys over %d kills", len(keys), len(points))
}

func usageBody(record, subject string) string {
	return fmt.Sprintf(`{"tenant_id":"acme","account_period":"2026-11","record_id":%q,"kind":"usage","subject":%q,`+
		`"amount":"2","currency":"USD","meter":"api_calls","quantity":"1","unit":"call",`+
		`"occurred_at":"2026-11-03T10:00:00Z","finalization_version":1}`, record, subject)
}

// postKey posts ek once; a 200 must repeat the key's first 200 byte for
// byte. It reports whether the key was answered 200. A connection cut by
// the kill, busy and unavailable are no answer; anything else fails.
func postKey(t *testing.T, cl *http.Client, url string, ek *edgeKey, mu *sync.Mutex) bool {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(ek.body))
	if err != nil {
		t.Error(err)
		return false
	}
	req.Header.Set("Authorization", "Bearer "+edgeKillToken)
	req.Header.Set("Idempotency-Key", ek.key)
	resp, err := cl.Do(req)
	if err != nil {
		return false
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return false
	}
	mu.Lock()
	defer mu.Unlock()
	switch {
	case resp.StatusCode == http.StatusOK:
		if ek.first == nil {
			ek.first = body
		} else if !bytes.Equal(ek.first, body) {
			t.Errorf("key %s answered %s, earlier %s", ek.key, body, ek.first)
		}
		return true
	case resp.StatusCode == http.StatusConflict && (bytes.Contains(body, []byte(`"busy"`)) || bytes.Contains(body, []byte(`"claim_lost"`))),
		resp.StatusCode == http.StatusServiceUnavailable:
		return false
	default:
		t.Errorf("key %s: answered %d %s", ek.key, resp.StatusCode, body)
		return false
	}
}

// checkEdgeKeys: at most sent keys exist, each done or in progress (which
// a retry takes over when its lease ends: the final round does), all done
// when final; and reconcile finds no record settled twice, no
// balance off its rows.
func checkEdgeKeys(t *testing.T, store *settle.Store, sent int, final bool) {
	t.Helper()
	ctx := context.Background()
	tot, err := reconcile.Count(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	total, done, leased := int(tot.Keys), int(tot.KeysDone), int(tot.KeysInProgress)
	if total > sent || done != total || leased != 0 || (final && done != sent) {
		t.Fatalf("keys: %d sent, %d stored, %d done, %d in progress (final %v)", sent, total, done, leased, final)
	}
	rep, err := reconcile.Run(ctx, store, reconcile.Input{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() {
		t.Fatalf("reconcile after the kill: %+v", rep.Findings[:min(5, len(rep.Findings))])
	}
}

// crashedAt is the crash point named by a killed process's log.
func crashedAt(log string) string {
	i := strings.Index(log, "crashpoint: ")
	if i < 0 {
		return ""
	}
	f := strings.Fields(log[i+len("crashpoint: "):])
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
