package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/internal/kafkahdr"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/service"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

func usageRecord(tenant, id, subject, amount string) []byte {
	return []byte(`{"tenant_id":"` + tenant + `","account_period":"2026-11","record_id":"` + id + `","kind":"usage","subject":"` + subject +
		`","amount":"` + amount + `","currency":"USD","meter":"gpu_seconds","quantity":"` + amount + `","unit":"s","occurred_at":"2026-11-03T10:00:00Z","finalization_version":1}`)
}

// analystDB is a migrated database with a store on it, the analyst API
// over that store, and the --database-url the commands get.
type analystDB struct {
	url   string
	store *settle.Store
	api   *httptest.Server
}

func newAnalystDB(t *testing.T) *analystDB {
	t.Helper()
	url := settletest.NewDatabase(t)
	s := settletest.NewStoreOn(t, url, settle.Config{})
	api := httptest.NewServer(analyst.Handler(analyst.Config{Store: analyst.StoreOf(s)}))
	t.Cleanup(api.Close)
	return &analystDB{url: url, store: s, api: api}
}

func (d *analystDB) settle(t *testing.T, ins ...message.Input) []message.Result {
	t.Helper()
	rs, err := d.store.Settle(context.Background(), "g", d.store.Decode(ins))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// cli runs settle in-process against the database and wants exit code.
func (d *analystDB) cli(t *testing.T, want int, args ...string) string {
	t.Helper()
	args = append(args, "--database-url", d.url)
	code, out := runArgs(t, args...)
	if code != want {
		t.Fatalf("settle %s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, out)
	}
	return out
}

// sameJSON asserts that a command's --json output and an API answer hold
// the same data.
func (d *analystDB) sameJSON(t *testing.T, cliOut, apiPath string) {
	t.Helper()
	resp, err := http.Get(d.api.URL + apiPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", apiPath, resp.StatusCode, body)
	}
	var a, b any
	if err := json.Unmarshal([]byte(cliOut), &a); err != nil {
		t.Fatalf("cli output is not JSON: %v\n%s", err, cliOut)
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("cli --json and GET %s differ:\ncli: %s\napi: %s", apiPath, cliOut, body)
	}
}

// TestConflictsCLI runs every conflicts verb, explain and dlq list in
// process, and checks each --json output against the API's answer for the
// same data.
func TestConflictsCLI(t *testing.T) {
	t.Parallel()
	d := newAnalystDB(t)
	rs := d.settle(t,
		message.Input{Topic: "usage", Offset: 0, Value: []byte(`{"tenant_id":"acme","account_period":"2026-11","record_id":"g-1","kind":"grant","subject":"cust-1","amount":"100","currency":"USD","occurred_at":"2026-11-03T10:00:00Z"}`)},
		message.Input{Topic: "usage", Offset: 1, Value: usageRecord("acme", "u-1", "cust-1", "40")},
		message.Input{Topic: "usage", Offset: 2, Value: usageRecord("acme", "u-1", "cust-1", "55")},
		// A subject a spreadsheet would run as a formula.
		message.Input{Topic: "usage", Offset: 3, Value: usageRecord("globex", "u-7", "=HYPERLINK(1)", "3")},
		message.Input{Topic: "usage", Offset: 4, Value: usageRecord("globex", "u-7", "=HYPERLINK(1)", "4")},
		message.Input{Topic: "usage", Offset: 5, Value: []byte(`{"tenant_id":"acme", nope`)},
	)
	acme, globex := rs[2].CaseID, rs[4].CaseID
	if acme == 0 || globex == 0 || rs[5].Outcome != message.OutcomeDeadLettered {
		t.Fatalf("fixture outcomes: %+v", rs)
	}

	// list: filters, paging, JSON = /api/cases.
	d.sameJSON(t, d.cli(t, 0, "conflicts", "list", "--status", "all", "--json"), "/api/cases?status=all")
	d.sameJSON(t, d.cli(t, 0, "conflicts", "list", "--tenant", "acme", "--json"), "/api/cases?status=open&tenant=acme")
	d.sameJSON(t, d.cli(t, 0, "conflicts", "list", "--reason", "orphan", "--json"), "/api/cases?status=open&reason=orphan")
	d.sameJSON(t, d.cli(t, 0, "conflicts", "list", "--newer-than", "1h", "--json"), "/api/cases?status=open&newer_than=1h")
	if out := d.cli(t, 0, "conflicts", "list", "--older-than", "1h"); !strings.Contains(out, "no open cases match (opened more than 1h ago); --status all lists every case") {
		t.Errorf("older-than 1h: %s", out)
	}
	// The table names the fields that differ, as the queue page does.
	if out := d.cli(t, 0, "conflicts", "list", "--tenant", "acme"); !regexp.MustCompile(`(?m)^CASE .* DIFFERS$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\d+ .* u-1 .* 40 +55 +amount\S*$`).MatchString(out) {
		t.Errorf("acme's list does not say what differs in u-1's case:\n%s", out)
	}
	out := d.cli(t, 0, "conflicts", "list", "--limit", "1")
	if !strings.Contains(out, "u-7") || !strings.Contains(out, "more: add --after ") {
		t.Fatalf("first page: %s", out)
	}
	cursor := strings.TrimSpace(out[strings.Index(out, "--after ")+len("--after "):])
	if out := d.cli(t, 0, "conflicts", "list", "--limit", "1", "--after", cursor); !strings.Contains(out, "u-1") || strings.Contains(out, "more:") {
		t.Errorf("second page: %s", out)
	}
	d.cli(t, 2, "conflicts", "list", "--status", "bogus")
	if out := d.cli(t, 2, "conflicts", "list", "--older-than", "a week"); !strings.Contains(out, "--older-than") {
		t.Errorf("a bad age should name its flag: %s", out)
	}
	d.cli(t, 2, "conflicts", "list", "--after", "not-a-cursor")

	// show and diff: JSON = /api/cases/ID; text marks the differing fields
	// and names every delivery.
	d.sameJSON(t, d.cli(t, 0, "conflicts", "show", fmt.Sprint(acme), "--json"), fmt.Sprintf("/api/cases/%d", acme))
	d.sameJSON(t, d.cli(t, 0, "conflicts", "diff", fmt.Sprint(acme), "--json"), fmt.Sprintf("/api/cases/%d", acme))
	out = d.cli(t, 0, "conflicts", "diff", fmt.Sprint(acme))
	for _, want := range []string{"!  amount", "!  quantity", "2 differing: amount, quantity", "usage/0@2"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "!  currency") {
		t.Errorf("diff marks an equal field:\n%s", out)
	}
	if out := d.cli(t, 0, "conflicts", "show", fmt.Sprint(acme)); !strings.Contains(out, "unresolved: settle conflicts resolve") {
		t.Errorf("show: %s", out)
	}
	d.cli(t, 1, "conflicts", "show", "999999")

	// export: CSV neutralises formulas; JSON holds what the API lists.
	out = d.cli(t, 0, "conflicts", "export", "--format", "csv", "--status", "all")
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("csv: %v\n%s", err, out)
	}
	if subject := rows[1][9]; subject != "'=HYPERLINK(1)" {
		t.Errorf("csv subject cell %q: want the formula neutralised", subject)
	}
	d.sameJSON(t, `{"cases":`+d.cli(t, 0, "conflicts", "export", "--format", "json", "--status", "all")+`}`, "/api/cases?status=all")
	d.cli(t, 2, "conflicts", "export", "--format", "xlsx")

	// resolve: needs a reason and a name; accept settles once.
	d.cli(t, 2, "conflicts", "resolve", fmt.Sprint(acme), "--accept", "--as", "ana")
	d.cli(t, 2, "conflicts", "resolve", fmt.Sprint(acme), "--accept", "--reject", "--reason", "x", "--as", "ana")
	d.cli(t, 1, "conflicts", "resolve", "999999", "--accept", "--reason", "x", "--as", "ana")
	var first, second settle.Resolution
	if err := json.Unmarshal([]byte(d.cli(t, 0, "conflicts", "resolve", fmt.Sprint(acme), "--accept", "--reason", "meter re-read", "--as", "ana", "--json")), &first); err != nil {
		t.Fatalf("resolve --json (first): %v", err)
	}
	if err := json.Unmarshal([]byte(d.cli(t, 0, "conflicts", "resolve", fmt.Sprint(acme), "--accept", "--reason", "meter re-read", "--as", "ana", "--json")), &second); err != nil {
		t.Fatalf("resolve --json (second): %v", err)
	}
	if first.Status != "accepted" || first.SettlementID == "" || !second.Replayed || second.SettlementID != first.SettlementID {
		t.Errorf("resolve twice: %+v then %+v", first, second)
	}
	if out := d.cli(t, 0, "conflicts", "resolve", fmt.Sprint(globex), "--reject", "--reason", "bad meter", "--as", "bo"); !strings.Contains(out, "rejected") {
		t.Errorf("reject: %s", out)
	}
	// export after resolving: the resolution columns name who (the
	// database login, --as a note after it), why and what it settled.
	var loginName string
	if err := d.store.Pool().QueryRow(context.Background(), `SELECT session_user`).Scan(&loginName); err != nil {
		t.Fatal(err)
	}
	out = d.cli(t, 0, "conflicts", "export", "--status", "accepted")
	if rows, err := csv.NewReader(strings.NewReader(out)).ReadAll(); err != nil || len(rows) != 2 || len(rows[1]) != len(analyst.CaseCSVHeader) ||
		rows[1][14] != "accept" || rows[1][15] != loginName+" (as ana)" || rows[1][16] != "meter re-read" || rows[1][19] != first.SettlementID {
		t.Errorf("export of the accepted case: %v\n%s", err, out)
	}
	var rows2 int
	if err := d.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM ledger_entries e JOIN identities i ON i.id = e.identity_id WHERE i.operation = 'resolution'`).Scan(&rows2); err != nil {
		t.Fatal(err)
	}
	if rows2 != 1 {
		t.Errorf("%d ledger rows from resolutions, want 1", rows2)
	}

	// explain: JSON = /api/explain; the text names rows and links.
	d.sameJSON(t, d.cli(t, 0, "explain", "acme", "2026-11", "u-1", "--json"), "/api/explain/acme/2026-11/u-1")
	d.sameJSON(t, d.cli(t, 0, "explain", "acme", "2026-11", fmt.Sprint(acme), "--json"), fmt.Sprintf("/api/explain/acme/2026-11/%d", acme))
	out = d.cli(t, 0, "explain", "acme", "2026-11", "u-1")
	for _, want := range []string{"usage: settled", "ledger row", "-40", "correction   2026-11/" + fmt.Sprint(acme) + " (resolution)", "net charge 55", "outbox", fmt.Sprintf("case %d (usage, fingerprint_mismatch): accepted", acme)} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	d.cli(t, 1, "explain", "acme", "2026-11", "never-seen")

	// dlq list: JSON = /api/dlq.
	d.sameJSON(t, d.cli(t, 0, "dlq", "list", "--json"), "/api/dlq")
	if out := d.cli(t, 0, "dlq", "list"); !strings.Contains(out, "invalid_json") || !strings.Contains(out, "usage/0@5") {
		t.Errorf("dlq list: %s", out)
	}
}

// TestDLQReplayTwice: a valid record dead-lettered after transient failures
// is replayed to its source topic with its original bytes and headers and
// settles; replaying everything again settles nothing twice (the identity
// answers duplicate), and an invalid record is dead-lettered again.
func TestDLQReplayTwice(t *testing.T) {
	t.Parallel()
	d := newAnalystDB(t)
	broker := kafkatest.NewCluster(t, 1)
	defer broker.Close()
	brokers := strings.Join(broker.ListenAddrs(), ",")

	// The dead letters come from offsets 1000 and 1001 of a topic that has
	// since been recreated: replays land at new offsets (0, 1, ...), as they
	// do on a real topic, so the store does not take them for redeliveries.
	good := usageRecord("acme", "u-1", "cust-1", "5")
	rs := d.settle(t,
		message.Input{Topic: "usage", Offset: 1000, Key: []byte("acme/cust-1"), Value: good,
			Headers: []record.Header{{Key: "trace", Value: []byte("abc")}}, Exhausted: &message.Exhausted{Err: "timeout", Attempts: 5}},
		message.Input{Topic: "usage", Offset: 1001, Value: []byte(`not json`)},
	)
	if rs[0].Reason != message.ReasonTransientExhausted || rs[1].Reason != message.ReasonInvalidJSON {
		t.Fatalf("fixture: %+v", rs)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.ListenAddrs()...), kgo.ConsumeTopics("usage"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// pipeline consumes n records from the topic and settles them, as the
	// consumer would.
	pipeline := func(n int) []message.Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var ins []message.Input
		for len(ins) < n {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("got %d of %d replayed records: %v", len(ins), n, err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				ins = append(ins, message.Input{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value,
					Headers: kafkahdr.FromKafka(r.Headers)})
			})
		}
		if len(ins) != n {
			t.Fatalf("topic held %d records, want %d", len(ins), n)
		}
		for _, in := range ins {
			if in.Headers[len(in.Headers)-1].Key != service.ReplayHeader ||
				(bytes.Equal(in.Value, good) && (string(in.Key) != "acme/cust-1" || in.Headers[0].Key != "trace")) {
				t.Fatalf("replayed record: key %q value %s headers %v", in.Key, in.Value, in.Headers)
			}
		}
		return d.settle(t, ins...)
	}

	// The dry run says which one fails again (its bytes are not a
	// record), before the replay shows it.
	out := d.cli(t, 0, "dlq", "replay", "--dry-run")
	if !strings.Contains(out, "would replay 2 dead letter(s)") || strings.Count(out, "it fails again: its own bytes failed") != 1 {
		t.Errorf("dry run: %s", out)
	}
	d.cli(t, 0, "dlq", "replay", "--brokers", brokers)
	got := outcomes(pipeline(2))
	if got != "settled,dead_lettered" {
		t.Fatalf("first replay: %s", got)
	}
	// Again: only the dead letter the first replay made; the two it
	// replayed are left out (replaying them at every run doubled the
	// dead letters), and the list says which were replayed.
	out = d.cli(t, 0, "dlq", "replay", "--brokers", brokers, "--json")
	if n := strings.Count(out, `"to":`); n != 1 || !strings.Contains(out, `"id":3`) {
		t.Errorf("second replay produced %d records, want 1 (dead letter 3):\n%s", n, out)
	}
	if got := outcomes(pipeline(1)); got != "dead_lettered" {
		t.Errorf("second replay: %s", got)
	}
	out = d.cli(t, 0, "dlq", "list", "--json")
	if n := strings.Count(out, `"replays": 1`); n != 3 || strings.Count(out, `"replays": 0`) != 1 {
		t.Errorf("dlq list after two replays: %d replayed once, want 3:\n%s", n, out)
	}
	// --again: every dead letter, the replayed ones too.
	out = d.cli(t, 0, "dlq", "replay", "--brokers", brokers, "--json", "--again")
	if n := strings.Count(out, `"to":`); n != 4 {
		t.Errorf("replay --again produced %d records, want 4:\n%s", n, out)
	}
	if got := outcomes(pipeline(4)); got != "duplicate,dead_lettered,dead_lettered,dead_lettered" {
		t.Errorf("replay --again: %s", got)
	}
	var ledgerRows int
	if err := d.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM ledger_entries`).Scan(&ledgerRows); err != nil {
		t.Fatal(err)
	}
	if ledgerRows != 1 {
		t.Errorf("%d ledger rows after three replays, want 1", ledgerRows)
	}
	d.cli(t, 1, "dlq", "replay", "--id", "424242", "--dry-run")
}

func outcomes(rs []message.Result) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Outcome)
		if r.Outcome == message.OutcomeDeadLettered && r.Reason != message.ReasonInvalidJSON {
			out[i] += "(" + r.Reason + ": " + r.Error + ")"
		}
	}
	return strings.Join(out, ",")
}
