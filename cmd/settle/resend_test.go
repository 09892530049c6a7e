package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/retention"
	"github.com/settlehq/settle/settle/settletest"
)

// TestResendDeadLetter: a dead letter corrected and resent, end to end on
// a real `settle run` (kfake, PostgreSQL). A resolver's token gets 403 on
// the form and the API route and no form on the page, and nothing is
// written; an operator's form answers 303, the corrected record settles
// through the consumer with the identity and fingerprint its corrected
// fields give (a second, identical record from a producer is a duplicate
// of it), the letter's page lists the edit with the token's name, the
// reason, the diff and where the record went, and explain of the record
// names the letter. From the CLI: a reader's and a resolver's login are
// refused (exit 1, and the database refuses the resolver's edit without
// the CLI too), an operator's resend records the login as the author,
// whatever --as would say, and settles.
func TestResendDeadLetter(t *testing.T) {
	t.Parallel()
	d := newAnalystDB(t)
	ctx := context.Background()
	bad := func(id string, off int64) message.Input {
		return message.Input{Topic: "usage", Offset: off, Key: []byte("acme/cust-1"), Value: opsRecord(id, "amount", "four")}
	}
	rs := d.settle(t, bad("r-1", 1), bad("r-2", 2))
	for _, r := range rs {
		if r.Outcome != message.OutcomeDeadLettered {
			t.Fatalf("fixture: %+v", rs)
		}
	}
	dead, err := inspect.New(d.store).DeadLetters(ctx, inspect.DeadLetterFilter{})
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead letters: %+v, %v", dead, err)
	}
	web, cli := dead[0], dead[1]
	edits := func(id int64) []inspect.DeadLetterEdit {
		t.Helper()
		es, err := inspect.New(d.store).DeadLetterEdits(ctx, dead[0].TenantID, id)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}

	broker := kafkatest.NewCluster(t, 2)
	defer broker.Close()
	brokers := strings.Join(broker.ListenAddrs(), ",")
	admin := testnet.FreeAddr(t)
	out, _ := startService(t, "run", "--database-url", d.url, "--brokers", brokers, "--admin-addr", admin,
		"--admin-token", "otto:operate=tok-otto-0123456789abcdef", "--admin-token", "rob:resolve=tok-rob-0123456789abcdef",
		"--session-timeout", "1s", "--backoff-max", "200ms", "--shutdown-timeout", "10s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service log:\n%s", out.String())
		}
	})
	testnet.WaitFor(t, "/livez 200", 30*time.Second, func() bool { c, _ := testnet.HTTPGet("http://" + admin + "/livez"); return c == 200 })
	s := &adminService{admin: admin, db: d}
	as := func(token, method, path, ct, body string) (int, string) {
		return s.do(t, method, path, "", body, "Authorization", "Bearer "+token, "Content-Type", ct, "Sec-Fetch-Site", "same-origin")
	}
	form := url.Values{"set": {"amount=4\nfinalization_version:=2"}, "reason": {"the producer wrote the amount in words"}}.Encode()
	letter := fmt.Sprintf("/dlq/%d", web.ID)

	// A resolver: no form, and 403 on both routes; nothing written.
	if code, page := as("tok-rob-0123456789abcdef", "GET", letter, "", ""); code != 200 || strings.Contains(page, `id="resend-form"`) {
		t.Fatalf("a resolver's letter page: %d, resend form shown: %v", code, strings.Contains(page, `id="resend-form"`))
	}
	if code, got := as("tok-rob-0123456789abcdef", "POST", letter+"/resend", "application/x-www-form-urlencoded", form); code != 403 {
		t.Fatalf("a resolver's form: %d, want 403: %s", code, got)
	}
	if code, got := as("tok-rob-0123456789abcdef", "POST", "/api"+letter+"/resend", "application/json",
		`{"set":{"amount":"4"},"reason":"words"}`); code != 403 || !strings.Contains(got, "needs the role operate") {
		t.Fatalf("a resolver's API resend: %d, want 403: %s", code, got)
	}
	if es := edits(web.ID); len(es) != 0 {
		t.Fatalf("a resolver's resend recorded %+v", es)
	}

	// An operator: the form, 303 to the letter.
	if _, page := as("tok-otto-0123456789abcdef", "GET", letter, "", ""); !strings.Contains(page, `id="resend-form"`) {
		t.Fatalf("an operator's letter page has no resend form")
	}
	code, _ := as("tok-otto-0123456789abcdef", "POST", letter+"/resend", "application/x-www-form-urlencoded", form)
	if code != 303 {
		t.Fatalf("an operator's form: %d, want 303", code)
	}
	es := edits(web.ID)
	if len(es) != 1 || es[0].EditedBy != "otto" || es[0].Reason != "the producer wrote the amount in words" || es[0].To == nil ||
		len(es[0].Diff) != 2 || string(es[0].Diff[0].From) != `"four"` || string(es[0].Diff[0].To) != `"4"` || string(es[0].Diff[1].To) != `2` {
		t.Fatalf("the edit recorded: %+v", es)
	}
	if got, err := inspect.New(d.store).DeadLetter(ctx, web.ID); err != nil || string(got.Value) != string(web.Value) || got.Replays != 1 {
		t.Fatalf("the letter after its resend: %+v, %v: want its bytes kept and one replay", got, err)
	}
	var e *inspect.Explanation
	t.Cleanup(func() {
		if t.Failed() {
			ds, _ := inspect.New(d.store).DeadLetters(ctx, inspect.DeadLetterFilter{})
			for _, dl := range ds {
				t.Logf("dead letter %d: %s %s %s", dl.ID, dl.Reason, dl.Error, dl.Value)
			}
		}
	})
	testnet.WaitFor(t, "r-1 settled", 20*time.Second, func() bool {
		e, _ = inspect.New(d.store).Explain(ctx, "acme", "2026-11", "r-1")
		return e != nil && len(e.Operations) == 1 && e.Operations[0].Outcome == "settled"
	})
	if got := e.Operations[0].FirstDelivery; got != *es[0].To {
		t.Errorf("the edit says the record went to %+v; it was consumed from %+v", *es[0].To, got)
	}
	if len(e.Operations[0].Entries) == 0 || e.Operations[0].Entries[0].Amount != "-4" {
		t.Errorf("the resent record settled %+v, want -4 (a usage of 4)", e.Operations[0].Entries)
	}
	if len(e.Letters) != 1 || e.Letters[0].ID != web.ID || e.Letters[0].Correction == nil || e.Letters[0].Correction.EditedBy != "otto" {
		t.Errorf("explain of the resent record names %+v, want letter %d corrected by otto", e.Letters, web.ID)
	}
	if _, page := as("tok-otto-0123456789abcdef", "GET", letter, "", ""); !strings.Contains(page, `<td class="edited-by">otto</td>`) ||
		!strings.Contains(page, "the producer wrote the amount in words") || !strings.Contains(page, `class="resent-explain"`) {
		t.Errorf("the letter's page does not list the correction:\n%s", page)
	}

	// The API: a second correction of the same letter is a duplicate of
	// the first record: its identity and fingerprint are its fields'.
	code, body := as("tok-otto-0123456789abcdef", "POST", "/api"+letter+"/resend", "application/json",
		`{"set":{"amount":"4","finalization_version":2},"reason":"again"}`)
	var res analyst.Resent
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || res.EditedBy != "otto" || res.DeadLetterID != web.ID {
		t.Fatalf("API resend: %d %s", code, body)
	}
	testnet.WaitFor(t, "the second resend answered duplicate", 20*time.Second, func() bool {
		e, _ = inspect.New(d.store).Explain(ctx, "acme", "2026-11", "r-1")
		if e == nil || len(e.Operations) != 1 {
			return false
		}
		for _, dl := range e.Operations[0].Deliveries {
			if dl.Coordinates == res.To && dl.Outcome == "duplicate" {
				return true
			}
		}
		return false
	})

	// The CLI: a reader and a resolver are refused, and write nothing.
	readerName, reader := newLogin(t, d.url, "settle_reader")
	resolverName, resolver := newLogin(t, d.url, "settle_resolver")
	operatorName, operator := newLogin(t, d.url, "settle_operator")
	id := fmt.Sprint(cli.ID)
	run := func(loginURL string, want int) string {
		t.Helper()
		args := []string{"dlq", "resend", id, "--set", "amount=4", "--reason", "words", "--brokers", brokers, "--database-url", loginURL}
		code, out := runArgs(t, args...)
		if code != want {
			t.Fatalf("settle %s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, out)
		}
		return out
	}
	if out := run(reader, 1); !strings.Contains(out, readerName+" reads only") {
		t.Errorf("a reader's resend says: %s", out)
	}
	if out := run(resolver, 1); !strings.Contains(out, resolverName+" resolves cases but does not operate") {
		t.Errorf("a resolver's resend says: %s", out)
	}
	// Without the CLI, the database refuses the resolver's edit before
	// anything is sent.
	rstore, err := settle.Open(ctx, settletest.PoolOn(t, resolver, 2), settle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sent := false
	_, err = retention.New(rstore).Resend(ctx, retention.Edit{TenantID: cli.TenantID, DeadLetterID: cli.ID, Diff: []byte(`[]`),
		Value: []byte(`{}`), By: "ana", Reason: "words"}, func(context.Context, int64) (message.Coordinates, error) {
		sent = true
		return message.Coordinates{}, nil
	})
	if err == nil || sent || !strings.Contains(err.Error(), "settle_operator") {
		t.Errorf("a resolver's edit through the store: %v (sent %v), want refused before sending", err, sent)
	}
	if es := edits(cli.ID); len(es) != 0 {
		t.Fatalf("refused resends recorded %+v", es)
	}
	// An operator's: recorded under the login.
	if out := run(operator, 0); !strings.Contains(out, "resent dead letter "+id) {
		t.Errorf("the operator's resend says: %s", out)
	}
	if es := edits(cli.ID); len(es) != 1 || es[0].EditedBy != operatorName {
		t.Errorf("the CLI's edit records %+v, want %s", es, operatorName)
	}
	testnet.WaitFor(t, "r-2 settled", 20*time.Second, func() bool {
		e, _ = inspect.New(d.store).Explain(ctx, "acme", "2026-11", "r-2")
		return e != nil && len(e.Operations) == 1 && e.Operations[0].Outcome == "settled"
	})
}
