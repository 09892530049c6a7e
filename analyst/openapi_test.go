package analyst_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/edge/idempotency"
	"github.com/settlehq/settle/edge/ingest"
	"github.com/settlehq/settle/settle"
)

func init() {
	// The pages' and the stylesheet's bodies are text: checked as strings.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder("text/css", openapi3filter.PlainBodyDecoder)
}

// apiCall is one request of the OpenAPI test and the status it must get.
type apiCall struct {
	method, path, body, contentType string
	header                          map[string]string
	want                            int
	// badRequest: the request breaks the document on purpose (to get the
	// server's error answer); only the answer is checked.
	badRequest bool
}

// muxPath turns a ServeMux pattern into the document's method and path.
func muxPath(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	switch {
	case path == "/{$}":
		path = "/"
	case strings.HasSuffix(path, "/"):
		path += "{file}" // a subtree: /static/ serves files
	}
	return strings.ToLower(method), path
}

// probes are the admin listener's paths that package service serves beside
// this surface; service's TestProbesAsDocumented calls them.
var probes = map[string]bool{"/livez": true, "/readyz": true, "/metrics": true}

// TestOpenAPIDescribesEveryRoute: the document served at /api/openapi.json
// is valid OpenAPI 3.1; every route of the analysts' surface is in it and
// nothing else is; and real requests to every route of the surface and of
// the HTTP edge, over real stores with data, and their answers (statuses
// included) are as the document says. Its license is the repository's
// (seen failing before info.license was there).
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newV2Fixture(t)
	_, raw := get(t, f.srv.URL+"/api/openapi.json")
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData([]byte(raw))
	if err != nil {
		t.Fatalf("load the served document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("the document is not valid: %v", err)
	}
	// The license the repository's LICENSE file grants, by its SPDX name.
	if l := doc.Info.License; l == nil || l.Name != "Apache-2.0" || l.Identifier != "Apache-2.0" {
		t.Errorf("info.license: %+v, want Apache-2.0 (the LICENSE file's)", l)
	}

	// Every route the mux has is documented, and every documented admin
	// route is one the mux has.
	routes := map[string]bool{}
	for _, p := range analyst.RoutePatterns(analyst.Config{Store: analyst.StoreOf(f.store)}) {
		m, path := muxPath(p)
		routes[m+" "+path] = true
		if item := doc.Paths.Value(path); item == nil || item.GetOperation(strings.ToUpper(m)) == nil {
			t.Errorf("route %q (%s %s) is not in analyst/openapi.json", p, m, path)
		}
	}
	for path, item := range doc.Paths.Map() {
		for m := range item.Operations() {
			key := strings.ToLower(m) + " " + path
			if path != "/v1/records" && !probes[path] && !routes[key] {
				t.Errorf("the document has %s %s, which the surface does not serve", m, path)
			}
		}
	}

	// The edge over a store of its own.
	es := newFixture(t, nil).store
	const token = "tok-acme-0123456789"
	api, err := ingest.NewAPI(es, idempotency.New(es), ingest.Config{Tokens: map[string]string{token: "acme"}, BatchRecordsMax: 3})
	if err != nil {
		t.Fatal(err)
	}
	edgeSrv := httptest.NewServer(api)
	defer edgeSrv.Close()

	// An accepted case for the links, the resolution and the export.
	accepted := newV2Fixture(t)
	if _, err := accepted.store.Resolve(ctx, settle.ResolveRequest{CaseID: accepted.acmeCase, Decision: "accept", Reason: "re-read", By: "ana"}); err != nil {
		t.Fatal(err)
	}
	// Point the document at the test servers.
	doc.Servers = openapi3.Servers{{URL: f.srv.URL}, {URL: accepted.srv.URL}}
	doc.Paths.Value("/v1/records").Servers = openapi3.Servers{{URL: edgeSrv.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}

	cid, gid, dl := itoa(f.acmeCase), itoa(f.globexCase), itoa(f.dead[0].ID)
	same := map[string]string{"Sec-Fetch-Site": "same-origin"}
	form := "application/x-www-form-urlencoded"
	bearer := map[string]string{"Authorization": "Bearer " + token, "Idempotency-Key": "k-1"}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	rec := string(usageRecord("acme", "h-1", "cust-1", "5", "2026-11-03T10:00:00Z"))
	admin, acc := f.srv.URL, accepted.srv.URL
	calls := []apiCall{
		{method: "GET", path: admin + "/api/overview", want: 200},
		{method: "GET", path: admin + "/api/cases?status=open&tenant=acme&limit=10", want: 200},
		{method: "GET", path: admin + "/api/cases?status=bogus", want: 400},
		{method: "GET", path: admin + "/api/cases/counts?tenant=acme", want: 200},
		{method: "GET", path: admin + "/api/cases/" + cid, want: 200},
		{method: "GET", path: admin + "/api/cases/999999", want: 404},
		{method: "GET", path: admin + "/api/cases/x", want: 400},
		{method: "GET", path: admin + "/api/cases/" + cid + "/links", want: 200},
		{method: "GET", path: acc + "/api/cases/" + itoa(accepted.acmeCase) + "/links", want: 200},
		{method: "GET", path: acc + "/api/cases/" + itoa(accepted.acmeCase), want: 200},
		{method: "POST", path: admin + "/api/cases/" + gid + "/resolve", body: `{"decision":"reject","reason":"late duplicate","by":"ana"}`, contentType: "application/json", want: 200},
		{method: "POST", path: admin + "/api/cases/" + gid + "/resolve", body: `{"decision":"reject","reason":"again","by":"ana"}`, contentType: "application/json", want: 200},
		{method: "POST", path: admin + "/api/cases/" + cid + "/resolve", body: `{"decision":"accept","reason":"x","by":"ana","amount":"99999999999999999999"}`, contentType: "application/json", want: 409},
		{method: "POST", path: admin + "/api/cases/" + cid + "/resolve", body: `{"decision":"maybe","reason":"x","by":"ana"}`, contentType: "application/json", want: 400, badRequest: true},
		{method: "GET", path: admin + "/api/explain/acme/2026-11/u-1", want: 200},
		{method: "GET", path: acc + "/api/explain/acme/2026-11/" + itoa(accepted.acmeCase), want: 200},
		{method: "GET", path: admin + "/api/explain/acme/2026-11/never-seen", want: 200},
		{method: "GET", path: admin + "/api/dlq?reason=invalid_json", want: 200},
		{method: "GET", path: admin + "/api/dlq?limit=5000", want: 400},
		{method: "GET", path: admin + "/api/dlq/" + dl, want: 200},
		{method: "GET", path: admin + "/api/dlq/424242", want: 404},
		{method: "POST", path: admin + "/api/dlq/replay", body: `{"ids":[` + dl + `],"dry_run":true}`, contentType: "application/json", want: 200},
		{method: "POST", path: admin + "/api/dlq/replay", body: `{"ids":[` + dl + `]}`, contentType: "application/json", want: 200},
		{method: "POST", path: admin + "/api/dlq/replay", body: `{"ids":[424242]}`, contentType: "application/json", want: 404},
		{method: "GET", path: admin + "/api/search?q=u-1", want: 200},
		{method: "GET", path: admin + "/api/search?q=cust-1&tenant=acme", want: 200},
		{method: "GET", path: acc + "/api/search?q=" + itoa(accepted.acmeCase), want: 200},
		{method: "GET", path: admin + "/api/search?q=", want: 400, badRequest: true},
		{method: "GET", path: admin + "/api/accounts/acme/cust-1", want: 200},
		{method: "GET", path: acc + "/api/accounts/acme/cust-1?rows=5", want: 200},
		{method: "GET", path: admin + "/api/accounts/acme/nobody", want: 404},
		{method: "GET", path: admin + "/api/openapi.json", want: 200},
		{method: "GET", path: admin + "/", want: 200},
		{method: "GET", path: admin + "/cases", want: 200},
		{method: "GET", path: admin + "/cases?older_than=soon", want: 400},
		{method: "GET", path: admin + "/cases.csv?tenant=acme", want: 200},
		{method: "GET", path: admin + "/cases/" + cid, want: 200},
		{method: "GET", path: admin + "/cases/999999", want: 404},
		{method: "POST", path: admin + "/cases/" + cid + "/resolve", body: "decision=accept&amount=99999999999999999999&reason=late&by=ana", contentType: form, header: same, want: 409},
		{method: "POST", path: admin + "/cases/" + cid + "/resolve", body: "decision=reject&reason=dup&by=ana", contentType: form, header: same, want: 303},
		{method: "GET", path: admin + "/explain?tenant=acme&period=2026-11&record=u-1", want: 200},
		{method: "GET", path: admin + "/statement?tenant=acme&period=2026-11", want: 200},
		{method: "GET", path: admin + "/api/statement/acme/2026-11?rows=1", want: 200},
		{method: "GET", path: admin + "/api/statement/acme/2026-99", want: 400},
		{method: "GET", path: admin + "/search?q=u-1", want: 200},
		{method: "GET", path: admin + "/search?q=cust-9", want: 303},
		{method: "GET", path: admin + "/accounts/acme/cust-1", want: 200},
		{method: "GET", path: admin + "/accounts/acme/nobody", want: 404},
		{method: "GET", path: admin + "/dlq?topic=usage", want: 200},
		{method: "GET", path: admin + "/dlq/" + dl, want: 200},
		{method: "GET", path: admin + "/dlq/424242", want: 404},
		{method: "GET", path: admin + "/dlq/replay?reason=invalid_json", want: 200},
		{method: "POST", path: admin + "/dlq/replay", body: "id=" + dl, contentType: form, header: same, want: 303},
		{method: "GET", path: admin + "/dlq/replayed?id=" + dl, want: 200},
		{method: "POST", path: admin + "/dlq/" + dl + "/resend", body: "set=amount%3D1&reason=", contentType: form, header: same, want: 400},
		{method: "POST", path: admin + "/api/dlq/" + dl + "/resend", body: `{"set":{"amount":"1"},"reason":""}`, contentType: "application/json", want: 400, badRequest: true},
		{method: "POST", path: admin + "/api/dlq/424242/resend", body: `{"set":{"amount":"1"},"reason":"typo"}`, contentType: "application/json", want: 404},
		{method: "GET", path: admin + "/static/style.css", want: 200},

		{method: "POST", path: edgeSrv.URL + "/v1/records", body: rec, contentType: "application/json", header: bearer, want: 200},
		{method: "POST", path: edgeSrv.URL + "/v1/records", body: rec, contentType: "application/json", header: bearer, want: 200}, // replayed
		{method: "POST", path: edgeSrv.URL + "/v1/records", body: "[" + rec + "," + string(usageRecord("acme", "h-2", "cust-1", "6", "2026-11-03T10:00:00Z")) + "]",
			contentType: "application/json", header: with(bearer, "Idempotency-Key", "k-2"), want: 200},
		{method: "POST", path: edgeSrv.URL + "/v1/records", body: string(usageRecord("acme", "h-1", "cust-1", "7", "2026-11-03T10:00:00Z")),
			contentType: "application/json", header: bearer, want: 409},
		{method: "POST", path: edgeSrv.URL + "/v1/records", body: rec, contentType: "application/json", header: map[string]string{"Idempotency-Key": "k-3"}, want: 401},
		{method: "POST", path: edgeSrv.URL + "/v1/records", body: rec, contentType: "application/json", header: map[string]string{"Authorization": "Bearer " + token}, want: 400, badRequest: true},
		{method: "POST", path: edgeSrv.URL + "/v1/records", body: `{"tenant_id":"acme","record_id":"bad"}`, contentType: "application/json", header: with(bearer, "Idempotency-Key", "k-4"), want: 422},
		{method: "POST", path: edgeSrv.URL + "/v1/records", body: string(usageRecord("globex", "h-9", "cust-9", "1", "2026-11-03T10:00:00Z")),
			contentType: "application/json", header: with(bearer, "Idempotency-Key", "k-5"), want: 403},
		{method: "POST", path: edgeSrv.URL + "/v1/records", body: "[" + rec + "," + rec + "," + rec + "," + rec + "]", contentType: "application/json",
			header: with(bearer, "Idempotency-Key", "k-6"), want: 413},
		{method: "POST", path: edgeSrv.URL + "/v1/records", body: "[]", contentType: "application/json", header: with(bearer, "Idempotency-Key", "k-7"), want: 400, badRequest: true},
		{method: "POST", path: edgeSrv.URL + "/v1/records", body: "nope", contentType: "application/json", header: with(bearer, "Idempotency-Key", "k-8"), want: 400, badRequest: true},
		{method: "GET", path: edgeSrv.URL + "/v1/records", want: 405, badRequest: true},
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
	exercised := map[string]bool{}
	for _, c := range calls {
		name := c.method + " " + strings.TrimPrefix(strings.TrimPrefix(c.path, admin), acc)
		req, _ := http.NewRequest(c.method, c.path, strings.NewReader(c.body))
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		route, params, err := router.FindRoute(req)
		if err != nil {
			if c.method == "GET" && strings.HasSuffix(c.path, "/v1/records") {
				// GET is no operation of /v1/records: the 405 answer is
				// checked against the POST's documented errors.
				r2 := req.Clone(ctx)
				r2.Method = "POST"
				route, params, err = router.FindRoute(r2)
			}
			if err != nil {
				t.Errorf("%s: not in the document: %v", name, err)
				continue
			}
		}
		exercised[strings.ToLower(route.Method)+" "+route.Path] = true
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
		if !c.badRequest {
			vreq := req.Clone(ctx)
			vreq.Body = io.NopCloser(strings.NewReader(c.body))
			in.Request = vreq
			if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
				t.Errorf("%s: the request breaks the document: %v", name, err)
			}
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d: %s", name, resp.StatusCode, c.want, trim(body))
			continue
		}
		in.Request = req
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
			Options: opts}
		out.SetBodyBytes(body)
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			t.Errorf("%s: the %d answer breaks the document: %v\n%s", name, resp.StatusCode, err, trim(body))
		}
	}
	// Every documented route was called.
	var missed []string
	for path, item := range doc.Paths.Map() {
		for m := range item.Operations() {
			if key := strings.ToLower(m) + " " + path; !exercised[key] && !probes[path] {
				missed = append(missed, key)
			}
		}
	}
	sort.Strings(missed)
	if len(missed) > 0 {
		t.Errorf("routes the test did not call: %v", missed)
	}
	if got := f.replayer.ids(); len(got) != 2 {
		t.Errorf("replays through the API and the form: %v", got)
	}
}

var spaces = regexp.MustCompile(`\s+`)

func trim(b []byte) string {
	s := spaces.ReplaceAllString(string(bytes.TrimSpace(b)), " ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}
