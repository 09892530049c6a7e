package analyst_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/retention"
)

// recordingReplayer stands in for cmd/settle's Kafka producer (tested
// there against a broker): it records what it was asked to produce and
// answers with made-up coordinates, or fails after failAfter.
type recordingReplayer struct {
	mu        sync.Mutex
	got       []int64
	failAfter int // -1: never
	// recorded, as the service's replayer does, where each went
	// (retention.Store.DeadLettersReplayed)
	recorded *retention.Store
}

func (r *recordingReplayer) Replay(ctx context.Context, ds []inspect.DeadLetter) ([]message.Coordinates, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []message.Coordinates
	for i, d := range ds {
		if r.failAfter >= 0 && i >= r.failAfter {
			// A failure whose text is the database's: no page shows it.
			return out, errors.New(`record replays of dead letters: ERROR: permission denied for table dead_letter_replays (SQLSTATE 42501)`)
		}
		again := int64(slices.Index(r.got, d.ID)+1) * 10000 // a second replay of d lands elsewhere
		if again > 0 {
			again = int64(len(r.got)) * 10000
		}
		r.got = append(r.got, d.ID)
		out = append(out, message.Coordinates{Topic: d.Source.Topic, Partition: d.Source.Partition, Offset: 1000 + d.ID + again})
		if err := r.recorded.DeadLettersReplayed(ctx, []int64{d.ID}, out[len(out)-1:]); err != nil {
			return out[:len(out)-1], err
		}
	}
	return out, nil
}

func (r *recordingReplayer) ids() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// v2Fixture is the fixture with two dead letters (one not JSON, with
// headers; one too large on another topic) and a server with a replayer.
type v2Fixture struct {
	*fixture
	dead     []inspect.DeadLetter
	replayer *recordingReplayer
	srv      *httptest.Server
}

func newV2Fixture(t *testing.T) *v2Fixture {
	t.Helper()
	f := newFixture(t, nil)
	_, err := f.store.Settle(context.Background(), "g", f.store.Decode([]message.Input{
		{Topic: "usage", Partition: 2, Offset: 7, Key: []byte("acme/cust-1"), Value: []byte(`{"tenant_id":"acme",`),
			Headers: []record.Header{{Key: "traceparent", Value: []byte("00-abc-01")}, {Key: "bin", Value: []byte{0xff, 0x00}}}},
		{Topic: "usage-eu", Partition: 0, Offset: 3, Value: []byte{0xde, 0xad, 0xbe, 0xef}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	dead, err := inspect.New(f.store).DeadLetters(context.Background(), inspect.DeadLetterFilter{})
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead letters: %+v, %v", dead, err)
	}
	v := &v2Fixture{fixture: f, dead: dead, replayer: &recordingReplayer{failAfter: -1, recorded: retention.New(f.store)}}
	v.srv = httptest.NewServer(analyst.Handler(analyst.Config{Store: analyst.StoreOf(f.store), Replayer: v.replayer,
		TimeZone: time.FixedZone("CET", 3600)}))
	t.Cleanup(v.srv.Close)
	return v
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestSearchAndAccountPages: the search box finds a case by number, a
// record and an account, opening the one thing a term names; the account
// page shows balance, available, the settlement sequence and links; the
// case page links to the account, the stored record and its fingerprint.
func TestSearchAndAccountPages(t *testing.T) {
	t.Parallel()
	f := newV2Fixture(t)
	for term, want := range map[string]string{
		"#" + itoa(f.acmeCase): "/cases/" + itoa(f.acmeCase),
		"cust-9":               "/accounts/globex/cust-9",
		"g-1":                  "/explain?period=2026-11&record=g-1&tenant=acme",
	} {
		resp, err := noRedirect.Get(f.srv.URL + "/search?q=" + url.QueryEscape(term))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("search %q: %d to %q, want 303 to %q", term, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	// u-1 names a case and a record: a list.
	code, body := get(t, f.srv.URL+"/search?q=u-1")
	if code != 200 || strings.Count(body, `data-kind="case"`) != 1 || strings.Count(body, `data-kind="record"`) != 1 {
		t.Errorf("search u-1: %d\n%s", code, body)
	}
	code, body = get(t, f.srv.URL+"/search?q=nothing-here")
	if code != 200 || !strings.Contains(body, "Nothing matches") {
		t.Errorf("search for nothing: %d\n%s", code, body)
	}
	code, body = get(t, f.srv.URL+"/api/search?q=cust-1")
	var hits struct{ Hits []inspect.SearchHit }
	if code != 200 || json.Unmarshal([]byte(body), &hits) != nil || len(hits.Hits) != 1 || hits.Hits[0].Kind != "account" {
		t.Errorf("api search: %d %s", code, body)
	}

	// acme/cust-1: granted 100, charged 40 (the conflicting 55 waits in its case).
	code, body = get(t, f.srv.URL+"/accounts/acme/cust-1")
	for _, want := range []string{`id="balance-USD">60 `, `id="available-USD">60 `, `data-seq="2"`, `data-seq="1"`,
		`href="/explain?period=2026-11&amp;record=u-1&amp;tenant=acme"`, `<time datetime="`, `title="local: `} {
		if !strings.Contains(body, want) {
			t.Errorf("account page lacks %q: %d\n%s", want, code, body)
		}
	}
	if code, _ := get(t, f.srv.URL+"/accounts/acme/nobody"); code != 404 {
		t.Errorf("account page of nobody: %d, want 404", code)
	}
	code, body = get(t, f.srv.URL+"/api/accounts/acme/cust-1")
	var acct struct{ Accounts []analyst.Account }
	if code != 200 || json.Unmarshal([]byte(body), &acct) != nil || len(acct.Accounts) != 1 || len(acct.Accounts[0].Settlements) != 2 {
		t.Errorf("api account: %d %s", code, body)
	}

	c, err := inspect.New(f.store).Case(context.Background(), f.acmeCase)
	if err != nil {
		t.Fatal(err)
	}
	code, body = get(t, f.srv.URL+"/cases/"+itoa(f.acmeCase))
	for _, want := range []string{`id="account-link" href="/accounts/acme/cust-1"`, `id="stored-fp">`, `id="stored-delivery"`,
		"<code>usage/0@1</code>", c.IncomingFingerprint} {
		if !strings.Contains(body, want) {
			t.Errorf("case page lacks %q: %d\n%s", want, code, body)
		}
	}
	code, body = get(t, f.srv.URL+"/explain?tenant=acme&period=2026-11&record=u-1")
	if code != 200 || !strings.Contains(body, `class="account-link" href="/accounts/acme/cust-1?currency=USD"`) {
		t.Errorf("explain's account is not a link: %d\n%s", code, body)
	}
}

// TestDeadLetterPagesAndReplay: the list filters; a dead letter's page
// shows its original bytes and headers; the dry run lists and produces
// nothing; the confirmation produces exactly the listed ids; a broker
// failure says how far it got.
func TestDeadLetterPagesAndReplay(t *testing.T) {
	t.Parallel()
	f := newV2Fixture(t)
	first, second := f.dead[0], f.dead[1]
	code, body := get(t, f.srv.URL+"/dlq?topic=usage-eu")
	if code != 200 || strings.Count(body, `<tr data-id=`) != 1 || !strings.Contains(body, `data-id="`+itoa(second.ID)+`"`) {
		t.Errorf("dlq filtered by topic: %d\n%s", code, body)
	}
	code, body = get(t, f.srv.URL+"/dlq/"+itoa(first.ID))
	for _, want := range []string{`<code>traceparent</code>`, `<code>00-abc-01</code>`, "00000000  ff 00", `{&#34;tenant_id&#34;:&#34;acme&#34;,`, `acme/cust-1`} {
		if !strings.Contains(body, want) {
			t.Errorf("dead letter page lacks %q: %d\n%s", want, code, body)
		}
	}
	code, body = get(t, f.srv.URL+"/dlq/"+itoa(second.ID))
	if !strings.Contains(body, "00000000  de ad be ef") || !strings.Contains(body, "not UTF-8") {
		t.Errorf("binary dead letter page: %d\n%s", code, body)
	}

	// The dry run of everything lists both and produces nothing.
	code, body = get(t, f.srv.URL+"/dlq/replay")
	if code != 200 || !strings.Contains(body, `id="dry-run"`) || strings.Count(body, `<input type="hidden" name="id"`) != 2 {
		t.Errorf("dry run: %d\n%s", code, body)
	}
	if got := f.replayer.ids(); len(got) != 0 {
		t.Fatalf("the dry run produced %v", got)
	}
	// Confirm one id, as the form posts it (same origin).
	post := func(form url.Values) (int, string) {
		req, _ := http.NewRequest("POST", f.srv.URL+"/dlq/replay", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The form answers 303 to its result page, read back from the recorded
	// replays: reloading it shows the result and sends nothing again.
	code, body = post(url.Values{"id": {itoa(first.ID)}})
	if code != 200 || !strings.Contains(body, `id="replay-done"`) || !strings.Contains(body, "usage/2@"+itoa(1000+first.ID)) {
		t.Errorf("confirmed replay: %d\n%s", code, body)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("POST", f.srv.URL+"/dlq/replay", strings.NewReader("id="+itoa(first.ID)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if resp, err := noFollow.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dlq/replayed?id="+itoa(first.ID) {
			t.Errorf("the replay form answers %d, Location %q: want 303 to its result page", resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if got := f.replayer.ids(); !slices.Equal(got, []int64{first.ID, first.ID}) {
		t.Errorf("replayed %v, want exactly [%d %d] (two posts)", got, first.ID, first.ID)
	}
	code, body = get(t, f.srv.URL+"/dlq/replayed?id="+itoa(first.ID))
	if code != 200 || !strings.Contains(body, "usage/2@"+itoa(11000+first.ID)) {
		t.Errorf("the result page, reloaded: %d\n%s", code, body)
	}
	if got := f.replayer.ids(); len(got) != 2 {
		t.Errorf("reloading the result page replayed: %v", got)
	}
	// A cross-site form post is refused and produces nothing.
	req, _ = http.NewRequest("POST", f.srv.URL+"/dlq/replay", strings.NewReader("id="+itoa(second.ID)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Errorf("cross-site replay: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site replay: %v", resp.StatusCode)
		}
	}
	if got := f.replayer.ids(); len(got) != 2 {
		t.Errorf("a refused post replayed: %v", got)
	}
	// The API: dry run, then a broker that fails after the first.
	f.replayer.failAfter = 1
	apiPost := func(body string) (int, analyst.ReplayResult) {
		resp, err := http.Post(f.srv.URL+"/api/dlq/replay", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res analyst.ReplayResult
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			t.Errorf("api replay %s: decode response: %v", body, err)
		}
		return resp.StatusCode, res
	}
	ids := `[` + itoa(first.ID) + `,` + itoa(second.ID) + `]`
	if code, res := apiPost(`{"ids":` + ids + `,"dry_run":true}`); code != 200 || !res.DryRun || len(res.Replayed) != 2 || res.Replayed[0].To != nil {
		t.Errorf("api dry run: %d %+v", code, res)
	}
	if code, res := apiPost(`{"ids":` + ids + `}`); code != http.StatusBadGateway || len(res.Replayed) != 1 || res.Error == "" ||
		strings.Contains(res.Error, "SQLSTATE") || strings.Contains(res.Error, "dead_letter_replays") || !strings.Contains(res.Error, "service log") {
		t.Errorf("api replay with a failing broker: %d %+v", code, res)
	}
	// The form says the same, without the database's text.
	fresp, err := http.PostForm(f.srv.URL+"/dlq/replay", url.Values{"id": {itoa(first.ID), itoa(second.ID)}})
	if err != nil {
		t.Fatal(err)
	}
	fbody, _ := io.ReadAll(fresp.Body)
	fresp.Body.Close()
	if fresp.StatusCode != http.StatusBadGateway || strings.Contains(string(fbody), "SQLSTATE") || strings.Contains(string(fbody), "dead_letter_replays") ||
		!strings.Contains(string(fbody), "the replay stopped after 1 of 2") {
		t.Errorf("form replay with a failing database: %d\n%s", fresp.StatusCode, fbody)
	}
	if code, _ := apiPost(`{"ids":[424242]}`); code != 404 {
		t.Errorf("api replay of a missing dead letter: %d", code)
	}
	// Without a replayer the dry run points to the CLI and the API says 503.
	bare := httptest.NewServer(analyst.Handler(analyst.Config{Store: analyst.StoreOf(f.store)}))
	defer bare.Close()
	code, body = get(t, bare.URL+"/dlq/replay?id="+itoa(first.ID))
	if code != 200 || !strings.Contains(body, "settle dlq replay --id "+itoa(first.ID)) || strings.Contains(body, `id="replay-form"`) {
		t.Errorf("dry run without a replayer: %d\n%s", code, body)
	}
	resp, err := http.Post(bare.URL+"/api/dlq/replay", "application/json", strings.NewReader(`{"ids":[`+itoa(first.ID)+`]}`))
	if err != nil {
		t.Fatalf("api replay without a replayer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("api replay without a replayer: %v", resp.StatusCode)
	}
}

// TestOverviewChartsAndExport: the overview draws a bar per hour with the
// hour's deliveries and the open cases by age; the CSV export of the queue
// carries the resolution columns.
// The queue page's export link for one tenant exports that tenant's cases
// only (it exported every tenant's: seen failing).
func TestOverviewChartsAndExport(t *testing.T) {
	t.Parallel()
	f := newV2Fixture(t)
	code, body := get(t, f.srv.URL+"/")
	// 7 deliveries this hour: 5 settled or quarantined records, 2 dead letters.
	if code != 200 || !strings.Contains(body, `<svg id="outcome-chart"`) || !strings.Contains(body, `data-total="7"`) ||
		strings.Count(body, `<g class="bar"`) < 24 || !strings.Contains(body, `<svg id="age-chart"`) ||
		!strings.Contains(body, `<g class="age" data-count="2"><title>&lt; 1 h: 2 open</title>`) {
		t.Errorf("overview: %d\n%s", code, body)
	}
	code, body = get(t, f.srv.URL+"/api/overview")
	var o struct {
		OpenByAge []inspect.AgeBucket `json:"open_by_age"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &o) != nil || len(o.OpenByAge) != 6 || o.OpenByAge[0].Count != 2 {
		t.Errorf("api overview: %d %s", code, body)
	}

	if _, err := f.store.Resolve(context.Background(), settle.ResolveRequest{CaseID: f.acmeCase, Decision: "accept", Reason: "=re-read", By: "ana"}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(f.srv.URL + "/cases.csv?status=all&tenant=acme")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rows, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" || len(rows) != 2 {
		t.Fatalf("export: %d %v %v", resp.StatusCode, rows, err)
	}
	col := map[string]string{}
	for i, name := range rows[0] {
		col[name] = rows[1][i]
	}
	if col["case"] != itoa(f.acmeCase) || col["decision"] != "accept" || col["resolved_by"] != "ana" ||
		col["resolution_reason"] != "'=re-read" || col["resolution_settlement_id"] == "" || col["resolved_at"] == "" {
		t.Errorf("export row: %v", col)
	}
	// The queue's default: open only, so the accepted case is not there.
	if code, body := get(t, f.srv.URL+"/cases.csv?tenant=acme"); code != 200 || strings.Count(body, "\n") != 1 {
		t.Errorf("export of open acme cases: %d %q", code, body)
	}
	// The queue page's export link and its counts' links keep the page's
	// filters (they were escaped into one parameter "tenant=acme").
	_, page := get(t, f.srv.URL+"/cases?tenant=acme&status=all")
	m := regexp.MustCompile(`id="export-csv" href="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no export link on the queue page:\n%s", page)
	}
	_, all := get(t, f.srv.URL+"/cases.csv?status=all")
	_, linked := get(t, f.srv.URL+html.UnescapeString(m[1]))
	if strings.Count(linked, "\n") != 2 || strings.Count(all, "\n") <= 2 || strings.Contains(linked, ",globex,") {
		t.Errorf("the export link %s of acme's queue gave\n%s(all tenants:\n%s)", m[1], linked, all)
	}
	if !strings.Contains(page, `href="/cases?tenant=acme&amp;reason=`) {
		t.Errorf("the counts' links lose the tenant:\n%s", page)
	}
}

// TestReplayDryRunPages: a dry run takes at most ReplayDeadLettersMax dead
// letters and links to the next ones, which start after the last it listed
// (dead letters stay after a replay, so "again" would list the same). A
// dry run of letters that failed on their own bytes says a replay
// dead-letters them again; the letter of a replay that failed again links
// to the letter it was replayed from.
func TestReplayDryRunPages(t *testing.T) {
	t.Parallel()
	f := newV2Fixture(t)
	n := analyst.ReplayDeadLettersMax + 1 - len(f.dead)
	ins := make([]message.Input, n)
	for i := range ins {
		ins[i] = message.Input{Topic: "usage", Partition: 5, Offset: int64(i), Value: []byte(`nope`)}
	}
	if _, err := f.store.Settle(context.Background(), "g", f.store.Decode(ins)); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, f.srv.URL+"/dlq/replay")
	hidden := strings.Count(body, `<input type="hidden" name="id"`)
	i := strings.Index(body, `id="next-replay" href="`)
	if code != 200 || hidden != analyst.ReplayDeadLettersMax || i < 0 {
		t.Fatalf("first dry run: %d, %d ids, next link at %d", code, hidden, i)
	}
	next := body[i+len(`id="next-replay" href="`):]
	next = strings.ReplaceAll(next[:strings.Index(next, `"`)], "&amp;", "&")
	code, body = get(t, f.srv.URL+next)
	if code != 200 || strings.Count(body, `<input type="hidden" name="id"`) != 1 || strings.Contains(body, `id="next-replay"`) {
		t.Errorf("second dry run (%s): %d\n%s", next, code, body)
	}
	// A replayed record that failed again: its letter links to the one it
	// was replayed from (the replay's header names that one's source).
	again, err := f.store.Settle(context.Background(), "g", f.store.Decode([]message.Input{{Topic: "usage", Partition: 2, Offset: 900,
		Value: f.dead[0].Value, Headers: []record.Header{{Key: inspect.ReplayHeader, Value: []byte("usage/2/7")}}}}))
	if err != nil || again[0].Outcome != message.OutcomeDeadLettered {
		t.Fatalf("replayed letter: %+v, %v", again, err)
	}
	letters, err := inspect.New(f.store).DeadLetters(context.Background(), inspect.DeadLetterFilter{Topic: "usage", AfterID: f.dead[len(f.dead)-1].ID, Limit: 1000})
	if err != nil || len(letters) == 0 {
		t.Fatal(letters, err)
	}
	last := letters[len(letters)-1]
	if _, body := get(t, f.srv.URL+"/dlq/"+itoa(last.ID)); !strings.Contains(body, `id="replay-of" href="/dlq/`+itoa(f.dead[0].ID)+`"`) {
		t.Errorf("the letter of a replay that failed again does not link to letter %d:\n%s", f.dead[0].ID, trim([]byte(body)))
	}
	// Letters that failed on their own bytes fail again: the dry run says
	// so before it offers the replay.
	if _, body := get(t, f.srv.URL+"/dlq/replay?id="+itoa(f.dead[0].ID)); !strings.Contains(body, `id="will-fail"`) ||
		!strings.Contains(body, "1 of these failed on their own bytes") {
		t.Errorf("a dry run of a letter that is not JSON does not say a replay fails again:\n%s", trim([]byte(body)))
	}
}
