package analyst_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// fixture settles a little traffic with two conflicts: acme's u-1 (amount
// and quantity differ) and globex's u-7 (occurred_at differs).
type fixture struct {
	store       *settle.Store
	acmeCase    int64
	globexCase  int64
	srv         *httptest.Server
	period      string
	acmeSubject string
}

func usageRecord(tenant, id, subject, amount, at string) []byte {
	return []byte(`{"tenant_id":"` + tenant + `","account_period":"2026-11","record_id":"` + id + `","kind":"usage","subject":"` + subject +
		`","amount":"` + amount + `","currency":"USD","meter":"gpu_seconds","quantity":"` + amount + `","unit":"s","occurred_at":"` + at + `","finalization_version":1}`)
}

func newFixture(t *testing.T, tokens map[string]analyst.Analyst) *fixture {
	t.Helper()
	s := settletest.NewStore(t, settle.Config{})
	at := "2026-11-03T10:00:00Z"
	ins := []message.Input{
		{Value: []byte(`{"tenant_id":"acme","account_period":"2026-11","record_id":"g-1","kind":"grant","subject":"cust-1","amount":"100","currency":"USD","occurred_at":"` + at + `"}`)},
		{Value: usageRecord("acme", "u-1", "cust-1", "40", at)},
		{Value: usageRecord("acme", "u-1", "cust-1", "55", at)},
		{Value: usageRecord("globex", "u-7", "cust-9", "3", at)},
		{Value: usageRecord("globex", "u-7", "cust-9", "3", "2026-11-03T11:00:00Z")},
	}
	for i := range ins {
		ins[i].Topic, ins[i].Offset = "usage", int64(i)
	}
	rs, err := s.Settle(context.Background(), "g", s.Decode(ins))
	if err != nil {
		t.Fatal(err)
	}
	if rs[2].CaseID == 0 || rs[4].CaseID == 0 {
		t.Fatalf("fixture: no cases: %+v", rs)
	}
	f := &fixture{store: s, acmeCase: rs[2].CaseID, globexCase: rs[4].CaseID, period: "2026-11", acmeSubject: "cust-1"}
	f.srv = httptest.NewServer(analyst.Handler(analyst.Config{Store: analyst.StoreOf(s), Tokens: tokens}))
	t.Cleanup(f.srv.Close)
	return f
}

func get(t *testing.T, url string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAPIAndPages: the JSON API and the pages show the same cases; the
// queue filters; the case page marks the differing fields; a resolve by
// API settles once, and the page then shows the resolution.
func TestAPIAndPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	code, body := get(t, f.srv.URL+"/api/cases?status=open&tenant=acme")
	var page inspect.CasePage
	if code != 200 || json.Unmarshal([]byte(body), &page) != nil || len(page.Cases) != 1 || page.Cases[0].ID != f.acmeCase {
		t.Fatalf("api cases: %d %s", code, body)
	}
	code, body = get(t, f.srv.URL+"/api/cases/counts")
	var counts []inspect.CaseCount
	if code != 200 || json.Unmarshal([]byte(body), &counts) != nil || len(counts) != 1 || counts[0].Count != 2 {
		t.Errorf("api counts: %d %s", code, body)
	}
	code, body = get(t, f.srv.URL+"/cases?tenant=globex")
	if code != 200 || !strings.Contains(body, "u-7") || strings.Contains(body, `href="/cases/`+itoa(f.acmeCase)+`"`) {
		t.Errorf("queue filtered to globex: %d\n%s", code, body)
	}
	code, body = get(t, f.srv.URL+"/cases/"+itoa(f.acmeCase))
	// Open: both sides of a difference marked, neither struck through
	// before a decision.
	if code != 200 || strings.Count(body, `data-differs="true"`) != 2 || !strings.Contains(body, `<mark class="incoming">55</mark>`) ||
		!strings.Contains(body, `<mark class="stored">40</mark>`) || strings.Contains(body, "<del>") {
		t.Errorf("case page: %d\n%s", code, body)
	}
	// Beside the payloads, the chain as it is now: what a resolution restates.
	if !strings.Contains(body, `id="chain-now">net charge <strong>40 USD</strong> at finalization version <strong>1</strong>`) {
		t.Errorf("case page does not show the chain's current total and version:\n%s", body)
	}
	for _, path := range []string{"/", "/dlq", "/explain?tenant=acme&period=2026-11&record=u-1", "/static/style.css", "/api/overview", "/api/dlq"} {
		if code, body := get(t, f.srv.URL+path); code != 200 {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
	for path, want := range map[string]int{"/cases/999999": 404, "/api/cases/999999": 404, "/api/cases?status=bogus": 400, "/cases/x": 400, "/api/cases?after=zzz": 400} {
		if code, _ := get(t, f.srv.URL+path); code != want {
			t.Errorf("GET %s: %d, want %d", path, code, want)
		}
	}

	post := func(body string, hdr ...string) (int, string) {
		req, _ := http.NewRequest("POST", f.srv.URL+"/api/cases/"+itoa(f.acmeCase)+"/resolve", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(`{"decision":"accept","reason":"","by":"ana"}`); code != 400 {
		t.Errorf("resolve without a reason: %d %s", code, body)
	}
	// A browser's cross-site form post is refused before it reaches Resolve.
	if code, _ := post(`{"decision":"accept","reason":"x","by":"evil"}`, "Sec-Fetch-Site", "cross-site"); code != http.StatusForbidden {
		t.Errorf("cross-site post: %d, want 403", code)
	}
	var first, second settle.Resolution
	code, body = post(`{"decision":"accept","reason":"meter re-read","by":"ana"}`)
	if code != 200 || json.Unmarshal([]byte(body), &first) != nil || first.Status != "accepted" || first.SettlementID == "" {
		t.Fatalf("resolve: %d %s", code, body)
	}
	code, body = post(`{"decision":"accept","reason":"meter re-read","by":"ana"}`)
	if code != 200 || json.Unmarshal([]byte(body), &second) != nil || !second.Replayed || second.SettlementID != first.SettlementID {
		t.Fatalf("second resolve: %d %s", code, body)
	}
	var e inspect.Explanation
	code, body = get(t, f.srv.URL+"/api/explain/acme/2026-11/"+itoa(f.acmeCase))
	if code != 200 || json.Unmarshal([]byte(body), &e) != nil || len(e.Operations) != 1 || len(e.Operations[0].Entries) != 1 || e.Operations[0].Entries[0].Amount != "-15" {
		t.Errorf("explain the adjustment: %d %s", code, body)
	}
	if code, body := get(t, f.srv.URL+"/cases/"+itoa(f.acmeCase)); code != 200 || !strings.Contains(body, `id="resolution"`) || strings.Contains(body, `id="accept-form"`) {
		t.Errorf("resolved case page: %d\n%s", code, body)
	}
}

// TestBearerToken: with a token configured, every analyst path needs it.
func TestBearerToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]analyst.Analyst{"s3cret": {Name: "alice"}})
	for _, path := range []string{"/", "/cases", "/api/cases", "/api/cases/" + itoa(f.acmeCase)} {
		if code, _ := get(t, f.srv.URL+path); code != 401 {
			t.Errorf("GET %s without a token: %d, want 401", path, code)
		}
		if code, _ := get(t, f.srv.URL+path, "Authorization", "Bearer wrong"); code != 401 {
			t.Errorf("GET %s with a wrong token: %d, want 401", path, code)
		}
		if code, _ := get(t, f.srv.URL+path, "Authorization", "Bearer s3cret"); code != 200 {
			t.Errorf("GET %s with the token: %d, want 200", path, code)
		}
	}
}

// TestFormResolveNeedsSameOrigin: the resolve form is refused from another
// origin and accepted from the page's own.
// A form accept of a case rejected meanwhile answers 409 with what was
// stored, not "Resolution recorded" (seen failing).
func TestFormResolveNeedsSameOrigin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	form := url.Values{"decision": {"reject"}, "reason": {"duplicate meter"}, "by": {"ana"}}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(origin string) int {
		req, _ := http.NewRequest("POST", f.srv.URL+"/cases/"+itoa(f.globexCase)+"/resolve", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send("http://evil.example"); code != http.StatusForbidden {
		t.Errorf("cross-origin form post: %d, want 403", code)
	}
	if c, _ := inspect.New(f.store).Case(context.Background(), f.globexCase); c.Status != "open" {
		t.Fatalf("case %s after a refused post", c.Status)
	}
	if code := send(f.srv.URL); code != http.StatusSeeOther {
		t.Errorf("same-origin form post: %d, want 303", code)
	}
	c, _ := inspect.New(f.store).Case(context.Background(), f.globexCase)
	if c.Status != "rejected" || c.Resolution == nil || c.Resolution.By != "ana" {
		t.Errorf("case after reject: %+v", c)
	}
	if !slices.Equal(c.Differing, []string{"occurred_at"}) {
		t.Errorf("differing %v", c.Differing)
	}
	// A second analyst's page, opened before the reject, accepts: the form
	// says the case was resolved otherwise instead of "Resolution recorded".
	form.Set("decision", "accept")
	if code := send(f.srv.URL); code != http.StatusConflict {
		t.Errorf("accepting a rejected case from the form: %d, want 409", code)
	}
	if c, _ := inspect.New(f.store).Case(context.Background(), f.globexCase); c.Status != "rejected" {
		t.Errorf("case %s after a refused accept", c.Status)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestStaticServesOnlyStatic: /static/ serves the style sheet and nothing
// else of the embedded files, however the path is spelt.
// A path spelt /static/%2e%2e/templates/... served a template: seen failing.
func TestStaticServesOnlyStatic(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if code, body := get(t, f.srv.URL+"/static/style.css"); code != 200 || !strings.Contains(body, "{") {
		t.Errorf("/static/style.css: %d", code)
	}
	for _, p := range []string{"/static/%2e%2e/templates/case.html", "/static/..%2ftemplates/case.html", "/static/templates/case.html"} {
		req, _ := http.NewRequest("GET", f.srv.URL+p, nil)
		req.URL.RawPath, req.URL.Path = p, p // sent as spelt (--path-as-is)
		req.URL.Opaque = p
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 || strings.Contains(string(body), "{{") {
			t.Errorf("GET %s: %d, a template served:\n%s", p, resp.StatusCode, body)
		}
	}
}

// TestTokenNamesTheAnalyst: a resolution through the API or the form
// records the analyst its token names, whatever name the request states,
// and the case page shows who is signed in instead of asking.
func TestTokenNamesTheAnalyst(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]analyst.Analyst{"alice-token": {Name: "alice"}, "bob-token": {Name: "bob"}})
	req, _ := http.NewRequest("POST", f.srv.URL+"/api/cases/"+itoa(f.acmeCase)+"/resolve",
		strings.NewReader(`{"decision":"accept","reason":"meter re-read","by":"mallory"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c, _ := inspect.New(f.store).Case(context.Background(), f.acmeCase); resp.StatusCode != 200 || c.Resolution == nil || c.Resolution.By != "alice" {
		t.Errorf("API resolve with alice's token, body by mallory: %d %+v, want by alice", resp.StatusCode, c.Resolution)
	}
	code, page := get(t, f.srv.URL+"/cases/"+itoa(f.globexCase), "Authorization", "Bearer bob-token")
	if code != 200 || !strings.Contains(page, `class="analyst">bob<`) || strings.Contains(page, `name="by"`) {
		t.Errorf("case page with bob's token: %d, want bob named and no name field:\n%s", code, page)
	}
	// A form without a name: the token's is enough.
	form := url.Values{"decision": {"reject"}, "reason": {"duplicate meter"}}
	req, _ = http.NewRequest("POST", f.srv.URL+"/cases/"+itoa(f.globexCase)+"/resolve", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "bearer bob-token")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err = client.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c, _ := inspect.New(f.store).Case(context.Background(), f.globexCase); resp.StatusCode != http.StatusSeeOther || c.Resolution == nil || c.Resolution.By != "bob" {
		t.Errorf("form resolve with bob's token and no name: %d %+v, want by bob", resp.StatusCode, c.Resolution)
	}
}

// TestHosts: the surface answers only the Host names it is given (by
// default the loopback names, any port); others get 421.
// A URL in Hosts fails Validate.
func TestHosts(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	for _, tc := range []struct {
		hosts []string
		host  string
		want  int
	}{
		{nil, "127.0.0.1:8080", 200},
		{nil, "localhost:1234", 200},
		{nil, "LocalHost", 200},
		{nil, "[::1]:8080", 200},
		{nil, "[::1]", 200},
		{nil, "evil.example:8080", 421},
		{nil, "127.0.0.2:8080", 421},
		{nil, "localhost.evil.example", 421},
		{nil, "", 421},
		{[]string{"10.1.2.3:8080", "analysts.example", "[fd00::1]:8080"}, "10.1.2.3:8080", 200},
		{[]string{"10.1.2.3:8080", "analysts.example", "[fd00::1]:8080"}, "10.1.2.3:9090", 421},
		{[]string{"10.1.2.3:8080", "analysts.example", "[fd00::1]:8080"}, "10.1.2.3", 421},
		{[]string{"10.1.2.3:8080", "analysts.example", "[fd00::1]:8080"}, "analysts.example:443", 200},
		{[]string{"10.1.2.3:8080", "analysts.example", "[fd00::1]:8080"}, "[FD00::1]:8080", 200},
		{[]string{"10.1.2.3:8080", "analysts.example", "[fd00::1]:8080"}, "localhost:8080", 421},
		{[]string{"settle:80"}, "settle", 200},
	} {
		h := analyst.Handler(analyst.Config{Store: analyst.StoreOf(s), Hosts: tc.hosts})
		req := httptest.NewRequest("GET", "/api/cases/counts", nil)
		req.Host = tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("hosts %v, Host %q: %d, want %d: %s", tc.hosts, tc.host, rec.Code, tc.want, rec.Body)
		}
	}
	if err := (analyst.Config{Store: analyst.StoreOf(s), Hosts: []string{"http://x/"}}).Validate(); err == nil {
		t.Error("a URL in Hosts is valid")
	}
}
