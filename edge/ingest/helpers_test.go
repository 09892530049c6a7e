package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/edge/edgetest"
	"github.com/settlehq/settle/edge/idempotency"
	"github.com/settlehq/settle/settle"
)

const (
	tokenAcme = "tok-acme-0123456789abcdef"
	tokenBeta = "tok-beta-0123456789abcdef"
)

// newAPI serves an API over a fresh store on a loopback httptest server.
func newAPI(t *testing.T, cfg Config, setup func(*API)) (*settle.Store, *httptest.Server) {
	return newAPIConns(t, cfg, setup, 6)
}

// newAPIConns is newAPI with a pool of maxConns connections (the server is
// shared by parallel tests: keep it small).
func newAPIConns(t *testing.T, cfg Config, setup func(*API), maxConns int32) (*settle.Store, *httptest.Server) {
	t.Helper()
	s := edgetest.AppStore(t, maxConns)
	cfg.Tokens = map[string]string{tokenAcme: "acme", tokenBeta: "beta"}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	api, err := NewAPI(s, idempotency.New(s), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(api)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return s, srv
}

type reply struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (r reply) code() string {
	var e struct{ Code string }
	_ = json.Unmarshal(r.body, &e)
	return e.Code
}

func post(srv *httptest.Server, token, key, body string) reply {
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/records", strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set(HeaderIdempotencyKey, key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

// postUntilAnswered retries a request while it is busy, the way a client
// honouring Retry-After would (faster, for the test).
func postUntilAnswered(t *testing.T, srv *httptest.Server, token, key, body string) reply {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := post(srv, token, key, body)
		if r.err == nil && !(r.status == http.StatusConflict && r.code() == CodeBusy) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %s still unanswered after 10s: %v %d %s", key, r.err, r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func usage(tenant, record, subject, amount string) string {
	return fmt.Sprintf(`{"tenant_id":%q,"account_period":"2026-11","record_id":%q,"kind":"usage","subject":%q,`+
		`"amount":%q,"currency":"USD","meter":"api_calls","quantity":"1","unit":"call",`+
		`"occurred_at":"2026-11-03T10:00:00Z","finalization_version":1}`, tenant, record, subject, amount)
}

func balance(t *testing.T, s *settle.Store, subject string) string {
	t.Helper()
	var b string
	err := s.Pool().QueryRow(context.Background(),
		`SELECT balance::text FROM account_states WHERE tenant_id = 'acme' AND subject = $1 AND currency = 'USD'`, subject).Scan(&b)
	if err != nil {
		t.Fatalf("balance of %s: %v", subject, err)
	}
	return b
}

// storedResponse is the answer key's row stores, put back together from
// the identities it quotes.
func storedResponse(t *testing.T, s *settle.Store, key string) []byte {
	t.Helper()
	var b []byte
	err := s.Pool().QueryRow(context.Background(),
		`SELECT settle_key_answer(tenant_id, answer, answer_identities, answer_at) FROM idempotency_keys WHERE tenant_id = 'acme' AND key = $1 AND status = 'done'`, key).Scan(&b)
	if err != nil {
		t.Fatalf("stored response of key %s: %v", key, err)
	}
	return b
}
