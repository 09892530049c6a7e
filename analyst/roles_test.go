package analyst_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/settle/inspect"
)

// The tokens of the role tests, each an analyst.
var roleTokens = map[string]analyst.Analyst{
	"tok-reader-0000000001":   {Name: "rita", Role: analyst.RoleRead},
	"tok-resolver-000000001":  {Name: "rob", Role: analyst.RoleResolve},
	"tok-operator-000000001":  {Name: "otto", Role: analyst.RoleOperate},
	"tok-legacy-00000000001":  {Name: "lee"}, // configured before roles: operates
	"tok-acme-reader-0000001": {Name: "ana", Role: analyst.RoleRead, Tenant: "acme"},
}

// tokenOf is the token of the analyst named name.
func tokenOf(name string) string {
	for tok, a := range roleTokens {
		if a.Name == name {
			return tok
		}
	}
	panic("no token of " + name)
}

// roleFixture is the v2 fixture (cases of acme and globex, dead letters
// without a tenant) with a dead letter of each tenant more, served with
// roleTokens.
type roleFixture struct {
	*v2Fixture
	acmeDead, globexDead int64
	srv                  *httptest.Server
	cfg                  analyst.Config
}

func newRoleFixture(t *testing.T) *roleFixture {
	t.Helper()
	v := newV2Fixture(t)
	ctx := context.Background()
	// The settling path writes no tenant on a dead letter (it cannot read
	// one from an input that does not decode); the column is there, and
	// the scope keys on it, so these two are written as a row with one.
	for i, tenant := range []string{"acme", "globex"} {
		if _, err := v.store.Pool().Exec(ctx, `INSERT INTO dead_letters (tenant_id, topic, partition, "offset", value, reason, error_class, error, attempts)
			VALUES ($1, 'usage', 0, $2, convert_to(format('{"tenant_id":"%s","record_id":"bad-%s"}', $1::text, $1::text), 'UTF8'),
			        'invalid_field', 'invalid_input', 'kind: required', 1)`, tenant, 20+i); err != nil {
			t.Fatal(err)
		}
	}
	f := &roleFixture{v2Fixture: v}
	for _, tenant := range []string{"acme", "globex"} {
		ds, err := inspect.New(v.store).DeadLetters(ctx, inspect.DeadLetterFilter{Tenant: tenant})
		if err != nil || len(ds) != 1 || ds[0].TenantID != tenant {
			t.Fatalf("fixture: dead letters of %s: %+v, %v", tenant, ds, err)
		}
		if tenant == "acme" {
			f.acmeDead = ds[0].ID
		} else {
			f.globexDead = ds[0].ID
		}
	}
	f.cfg = analyst.Config{Store: analyst.StoreOf(v.store), Replayer: v.replayer, Tokens: roleTokens}
	f.srv = httptest.NewServer(analyst.Handler(f.cfg))
	t.Cleanup(f.srv.Close)
	return f
}

// call sends one request as the analyst named who ("" = no token) and
// returns the status and body.
func (f *roleFixture) call(t *testing.T, who, method, path, contentType, body string) (int, string) {
	t.Helper()
	code, got, _ := f.callH(t, who, method, path, contentType, body)
	return code, got
}

// callH is call with the answer's header.
func (f *roleFixture) callH(t *testing.T, who, method, path, contentType, body string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+tokenOf(who))
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestRolesOnEveryRoute tries every analyst's role against every route the
// surface registers (its route list, not a hand-made one): below the
// route's role the answer is 403 and says which role it needs; at or
// above it the handler answers; without a token, 401. The role each
// operation of analyst/openapi.json names is the role the route needs, and
// every answer (401 and 403 too) is as the document describes it. A token
// configured without a role operates.
func TestRolesOnEveryRoute(t *testing.T) {
	t.Parallel()
	f := newRoleFixture(t)
	_, raw := f.call(t, "rita", "GET", "/api/openapi.json", "", "")
	doc, err := openapi3.NewLoader().LoadFromData([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = openapi3.Servers{{URL: f.srv.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	// asDocumented checks an answer against the document: 401 and 403
	// included.
	asDocumented := func(who, method, url, ct, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, f.srv.URL+url, strings.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s %s: not in the document: %v", method, url, err)
		}
		code, got, hdr := f.callH(t, who, method, url, ct, body)
		opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req,
			PathParams: params, Route: route, Options: opts}, Status: code, Header: hdr, Options: opts}
		out.SetBodyBytes([]byte(got))
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("%s %s as %q: the %d answer breaks the document: %v", method, url, who, code, err)
		}
		return code, got
	}
	cid, dl := itoa(f.acmeCase), itoa(f.acmeDead)
	fill := strings.NewReplacer("{id}", cid, "{tenant}", "acme", "{period}", "2026-11", "{record}", "u-1", "{subject}", "cust-1",
		"{file}", "style.css")
	// Bodies that reach the handler and change nothing: a bad decision,
	// a dry run, a form without ids.
	bodies := map[string][2]string{
		"POST /cases/{id}/resolve":     {"application/x-www-form-urlencoded", "decision=maybe&reason=x"},
		"POST /api/cases/{id}/resolve": {"application/json", `{"decision":"maybe","reason":"x"}`},
		"POST /api/dlq/replay":         {"application/json", `{"ids":[` + dl + `],"dry_run":true}`},
		"POST /dlq/replay":             {"application/x-www-form-urlencoded", ""},
		"POST /dlq/{id}/resend":        {"application/x-www-form-urlencoded", "set=amount%3D1&reason="},
		"POST /api/dlq/{id}/resend":    {"application/json", `{"set":{"amount":"1"},"reason":""}`},
	}
	roles := analyst.RouteRoles(f.cfg)
	if len(roles) < 25 {
		t.Fatalf("%d routes: the route list is not the surface's", len(roles))
	}
	for pattern, need := range roles {
		method, path := muxPath(pattern)
		op := doc.Paths.Value(path).GetOperation(strings.ToUpper(method))
		if op == nil || op.Security == nil || len(*op.Security) == 0 || len((*op.Security)[0]["analystToken"]) != 1 ||
			(*op.Security)[0]["analystToken"][0] != need.String() {
			t.Errorf("%s: the document does not name the role %s", pattern, need)
		}
		if dir, ok := strings.CutSuffix(path, "{file}"); ok && strings.Contains(pattern, "static") {
			path = dir + "{file}"
		}
		if strings.Contains(pattern, "/dlq/{id}") {
			path = strings.Replace(path, "{id}", dl, 1)
		}
		url := fill.Replace(path)
		ct, body := bodies[pattern][0], bodies[pattern][1]
		if code, _ := asDocumented("", strings.ToUpper(method), url, ct, body); code != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", pattern, code)
		}
		for _, who := range []string{"rita", "rob", "otto", "lee"} {
			a := roleTokens[tokenOf(who)]
			code, got := asDocumented(who, strings.ToUpper(method), url, ct, body)
			allowed := a.Role == 0 || a.Role >= need
			switch {
			case allowed && (code == http.StatusForbidden || code == http.StatusUnauthorized):
				t.Errorf("%s as %s (%v): %d, want the handler's answer: %s", pattern, who, a.Role, code, trim([]byte(got)))
			case !allowed && code != http.StatusForbidden:
				t.Errorf("%s as %s (%v): %d, want 403 (it needs %s)", pattern, who, a.Role, code, need)
			case !allowed && !strings.Contains(got, "needs the role "+need.String()):
				t.Errorf("%s as %s: the 403 does not name the role it needs: %s", pattern, who, trim([]byte(got)))
			}
		}
	}

	// A reader's resolve with a body that would carry it out is 403, and
	// the case stays open; a resolver's is carried out, recorded as the
	// token's analyst whatever the body says.
	body := `{"decision":"reject","reason":"duplicate","by":"someone-else"}`
	if code, got := f.call(t, "rita", "POST", "/api/cases/"+cid+"/resolve", "application/json", body); code != http.StatusForbidden {
		t.Fatalf("a reader's resolve: %d, want 403: %s", code, got)
	}
	if c, err := inspect.New(f.store).Case(context.Background(), f.acmeCase); err != nil || c.Status != inspect.CaseOpen {
		t.Fatalf("after a reader's resolve the case is %+v, %v: want it open", c, err)
	}
	if code, got := f.call(t, "rob", "POST", "/api/cases/"+cid+"/resolve", "application/json", body); code != http.StatusOK {
		t.Fatalf("a resolver's resolve: %d: %s", code, got)
	}
	if c, err := inspect.New(f.store).Case(context.Background(), f.acmeCase); err != nil || c.Resolution == nil || c.Resolution.By != "rob" {
		t.Errorf("the resolution records %+v (%v), want rob, the token's analyst", c, err)
	}
	// Decided: the rejected side, the incoming payload, is struck through.
	if _, page := f.call(t, "rita", "GET", "/cases/"+cid, "", ""); !strings.Contains(page, "<del>55</del>") ||
		!strings.Contains(page, `<mark class="stored">40</mark>`) {
		t.Errorf("the rejected case's page does not strike the incoming 55 alone:\n%s", trim([]byte(page)))
	}
	if got := f.replayer.ids(); len(got) != 0 {
		t.Errorf("a dry run replayed %v", got)
	}
}

// TestTenantScopedToken: a token scoped to acme sees acme's cases, counts,
// accounts, dead letters, search hits, exports and statements, and nothing
// of globex, through the API and the pages: a filter naming globex is 403,
// globex's case or dead letter by id is 404 (as if it did not exist).
func TestTenantScopedToken(t *testing.T) {
	t.Parallel()
	f := newRoleFixture(t)
	gid, gdl, adl := itoa(f.globexCase), itoa(f.globexDead), itoa(f.acmeDead)
	for _, c := range []struct {
		path string
		want int
	}{
		{"/api/cases?tenant=globex", 403},
		{"/api/cases/counts?tenant=globex", 403},
		{"/api/cases/" + gid, 404},
		{"/api/cases/" + gid + "/links", 404},
		{"/cases/" + gid, 404},
		{"/api/dlq/" + gdl, 404},
		{"/dlq/" + gdl, 404},
		{"/api/dlq?tenant=globex", 403},
		{"/api/accounts/globex/cust-9", 403},
		{"/accounts/globex/cust-9", 403},
		{"/api/explain/globex/2026-11/u-7", 403},
		{"/explain?tenant=globex&period=2026-11&record=u-7", 403},
		{"/api/statement/globex/2026-11", 403},
		{"/statement?tenant=globex&period=2026-11", 403},
		{"/cases.csv?tenant=globex", 403},
		{"/cases?tenant=globex", 403},
		{"/search?q=cust-9&tenant=globex", 403},
		{"/api/cases/" + itoa(f.acmeCase), 200},
		{"/api/dlq/" + adl, 200},
		{"/api/accounts/acme/cust-1", 200},
	} {
		if code, body := f.call(t, "ana", "GET", c.path, "", ""); code != c.want {
			t.Errorf("%s as ana (acme only): %d, want %d: %s", c.path, code, c.want, trim([]byte(body)))
		}
	}
	// Without a tenant filter, only acme's.
	var cases inspect.CasePage
	getJSON(t, f, "ana", "/api/cases?status=all", &cases)
	if len(cases.Cases) == 0 {
		t.Error("ana sees no case of acme")
	}
	for _, c := range cases.Cases {
		if c.TenantID != "acme" {
			t.Errorf("ana sees case %d of %s", c.ID, c.TenantID)
		}
	}
	var counts []inspect.CaseCount
	getJSON(t, f, "ana", "/api/cases/counts", &counts)
	var total int64
	for _, c := range counts {
		total += c.Count
	}
	if total != int64(len(cases.Cases)) {
		t.Errorf("ana's counts add up to %d, her cases are %d: %+v", total, len(cases.Cases), counts)
	}
	var ov struct {
		Attention    inspect.Attention   `json:"attention"`
		OpenByReason []inspect.CaseCount `json:"open_by_reason"`
		OpenByAge    []inspect.AgeBucket `json:"open_by_age"`
	}
	getJSON(t, f, "ana", "/api/overview", &ov)
	if ov.Attention.DeadLettersSince != 1 {
		t.Errorf("ana's overview counts %d dead letters of the last day, want acme's 1", ov.Attention.DeadLettersSince)
	}
	var open, aged int64
	for _, c := range ov.OpenByReason {
		open += c.Count
	}
	for _, b := range ov.OpenByAge {
		aged += b.Count
	}
	if open != 1 || aged != 1 {
		t.Errorf("ana's overview counts %d open cases (%d by age), want acme's 1", open, aged)
	}
	var dead []inspect.DeadLetter
	getJSON(t, f, "ana", "/api/dlq", &dead)
	if len(dead) != 1 || dead[0].ID != f.acmeDead {
		t.Errorf("ana's dead letters: %+v, want acme's %d alone", dead, f.acmeDead)
	}
	var hits struct{ Hits []inspect.SearchHit }
	getJSON(t, f, "ana", "/api/search?q=cust-9", &hits)
	if len(hits.Hits) != 0 {
		t.Errorf("ana finds globex's cust-9: %+v", hits.Hits)
	}
	for _, page := range []string{"/cases?status=all", "/cases.csv?status=all", "/dlq", "/", "/search?q=u-7&list=1"} {
		code, body := f.call(t, "ana", "GET", page, "", "")
		if code != http.StatusOK || strings.Contains(body, "globex") || strings.Contains(body, "cust-9") {
			t.Errorf("%s as ana: %d, shows globex: %s", page, code, trim([]byte(body)))
		}
	}
	// The overview puts the dead letters first: every tenant's to rita.
	if _, body := f.call(t, "rita", "GET", "/", "", ""); !strings.Contains(body, `id="first"`) ||
		!strings.Contains(body, "4 dead letters in the last 24 hours") {
		t.Errorf("rita's overview does not put the 4 dead letters first: %s", trim([]byte(body)))
	}
	// The same pages show globex to a token of every tenant.
	if _, body := f.call(t, "rita", "GET", "/cases?status=all", "", ""); !strings.Contains(body, "globex") {
		t.Error("rita (every tenant) does not see globex on the queue: the check above proves nothing")
	}
	// A resolve of globex's case by a token of acme is "no such case".
	if code, _ := f.call(t, "ana", "POST", "/api/cases/"+gid+"/resolve", "application/json", `{"decision":"reject","reason":"x"}`); code != http.StatusForbidden {
		t.Errorf("ana's resolve: %d, want 403 (role first)", code)
	}
}

// TestPagesOfferWhatTheRoleMay: a reader's case page has no resolve form
// and says why; a resolver's has it. A reader's and a resolver's
// dead-letter pages have no replay button; an operator's has. The header
// names the analyst, the role and the tenant. An account page links to its
// statement of each period; the dead-letter list shows the tenant and
// record id a letter's bytes name.
func TestPagesOfferWhatTheRoleMay(t *testing.T) {
	t.Parallel()
	f := newRoleFixture(t)
	cid, dl := itoa(f.acmeCase), itoa(f.acmeDead)
	for _, c := range []struct {
		who, path   string
		has, hasNot []string
	}{
		// Before a decision nothing is struck through: both sides are marked.
		{"rita", "/cases/" + cid, []string{`id="read-only"`, `<mark class="stored">`, `<mark class="incoming">`},
			[]string{`id="accept-form"`, `id="reject-form"`, "<del>"}},
		{"rob", "/cases/" + cid, []string{`id="accept-form"`, `id="reject-form"`}, []string{`id="read-only"`}},
		{"rita", "/dlq/" + dl, nil, []string{`id="replay-one"`}},
		{"rob", "/dlq/" + dl, nil, []string{`id="replay-one"`}},
		{"otto", "/dlq/" + dl, []string{`id="replay-one"`}, nil},
		{"rita", "/dlq", nil, []string{`id="replay-filtered"`}},
		{"otto", "/dlq", []string{`id="replay-filtered"`, "<strong>otto</strong> · operate · every tenant", "acme / bad-acme"}, nil},
		{"ana", "/", []string{"<strong>ana</strong> · read · tenant acme"}, nil},
		// The queue: each case's age and the difference, with its currency
		// (html/template writes + as &#43;).
		{"rita", "/cases", []string{`<td class="age">`, `<td class="num diff">&#43;15 USD</td>`, `<td class="num">40 USD</td>`}, nil},
		// The account links to its statement of each period it has rows in.
		{"ana", "/accounts/acme/cust-1", []string{`id="statements"`, `href="/statement?period=2026-11&amp;subject=cust-1&amp;tenant=acme"`}, nil},
	} {
		code, body := f.call(t, c.who, "GET", c.path, "", "")
		if code != http.StatusOK {
			t.Errorf("%s as %s: %d", c.path, c.who, code)
			continue
		}
		for _, s := range c.has {
			if !strings.Contains(body, s) {
				t.Errorf("%s as %s: no %s", c.path, c.who, s)
			}
		}
		for _, s := range c.hasNot {
			if strings.Contains(body, s) {
				t.Errorf("%s as %s: has %s", c.path, c.who, s)
			}
		}
	}
}

func getJSON(t *testing.T, f *roleFixture, who, path string, v any) {
	t.Helper()
	code, body := f.call(t, who, "GET", path, "", "")
	if code != http.StatusOK {
		t.Fatalf("%s as %s: %d: %s", path, who, code, trim([]byte(body)))
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
