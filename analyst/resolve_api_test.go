package analyst_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
)

// TestResolveAPIErrors: each way a resolve request can fail through the
// API is labelled for what it is (not "bad filter") and says what to send
// instead; a second resolve that contradicts the first answers 409 with
// the stored resolution, while repeating the same decision still answers
// 200 (a double submit).
func TestResolveAPIErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	post := func(path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	acme := "/api/cases/" + itoa(f.acmeCase) + "/resolve"
	for _, tc := range []struct {
		path, body string
		code       int
		says       string
	}{
		{acme, `{"decision":"maybe","reason":"x","by":"ana"}`, 400, "accept or reject"},
		{acme, `{"decision":"accept","reason":"","by":"ana"}`, 400, "reason is required"},
		{acme, `{"decision":"accept","reason":"x","by":""}`, 400, "name (by) is required"},
		{acme, `{"decision":"reject","amount":"5","reason":"x","by":"ana"}`, 400, "accept only"},
		{acme, `{"decision":"accept","reason":"x","by":"ana","extra":1}`, 400, "body"},
		{"/api/cases/x/resolve", `{"decision":"accept","reason":"x","by":"ana"}`, 400, "case id must be a number"},
		{"/api/cases/999999/resolve", `{"decision":"accept","reason":"x","by":"ana"}`, 404, "not found"},
	} {
		code, body := post(tc.path, tc.body)
		if code != tc.code || !strings.Contains(body, tc.says) || strings.Contains(body, "bad filter") {
			t.Errorf("POST %s %s: %d %s, want %d saying %q and not \"bad filter\"", tc.path, tc.body, code, body, tc.code, tc.says)
		}
	}

	if code, body := post(acme, `{"decision":"accept","reason":"meter re-read","by":"ana"}`); code != 200 {
		t.Fatalf("first resolve: %d %s", code, body)
	}
	if code, body := post(acme, `{"decision":"accept","reason":"meter re-read","by":"ana"}`); code != 200 {
		t.Errorf("the same resolve again: %d %s, want 200 (replayed)", code, body)
	}
	code, body := post(acme, `{"decision":"reject","reason":"changed my mind","by":"bo"}`)
	var conflict struct {
		Error      string            `json:"error"`
		Resolution settle.Resolution `json:"resolution"`
	}
	if code != http.StatusConflict || json.Unmarshal([]byte(body), &conflict) != nil ||
		conflict.Resolution.Decision != "accept" || !strings.Contains(conflict.Error, "already resolved") {
		t.Errorf("a contradicting second resolve: %d %s, want 409 with the stored accept", code, body)
	}
}

// TestAPICasesDefaultsToOpen: /api/cases without a status lists the open
// cases, as the queue page and `settle conflicts list` do; status=all
// lists every case.
func TestAPICasesDefaultsToOpen(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if _, err := f.store.Resolve(t.Context(), settle.ResolveRequest{CaseID: f.globexCase, Decision: "reject", Reason: "x", By: "ana"}); err != nil {
		t.Fatal(err)
	}
	ids := func(query string) []int64 {
		t.Helper()
		code, body := get(t, f.srv.URL+"/api/cases"+query)
		var page inspect.CasePage
		if code != 200 || json.Unmarshal([]byte(body), &page) != nil {
			t.Fatalf("GET /api/cases%s: %d %s", query, code, body)
		}
		var out []int64
		for _, c := range page.Cases {
			out = append(out, c.ID)
		}
		return out
	}
	if got := ids(""); len(got) != 1 || got[0] != f.acmeCase {
		t.Errorf("GET /api/cases: cases %v, want only the open one %d", got, f.acmeCase)
	}
	if got := ids("?status=all"); len(got) != 2 {
		t.Errorf("GET /api/cases?status=all: cases %v, want both", got)
	}
}
