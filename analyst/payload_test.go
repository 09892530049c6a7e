package analyst_test

import (
	"context"
	"html"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// TestPayloadsShownAsTheirBytesSay: the case page's payload panes and the
// dead-letter page show JSON as its bytes say. A finalization_version of
// 9007199254740993 (beyond float64's exact integers) keeps its last
// digit, a number 12345678901234567890 keeps every digit, and a record
// refused for a duplicate "amount" key shows both keys.
func TestPayloadsShownAsTheirBytesSay(t *testing.T) {
	t.Parallel()
	s := settletest.NewStore(t, settle.Config{})
	at := "2026-11-03T10:00:00Z"
	usage := func(amount string) []byte {
		return []byte(`{"tenant_id":"acme","account_period":"2026-11","record_id":"u-big","kind":"usage","subject":"cust-1","amount":"` +
			amount + `","currency":"USD","meter":"gpu_seconds","quantity":"1","unit":"s","occurred_at":"` + at +
			`","finalization_version":9007199254740993}`)
	}
	dup := []byte(`{"tenant_id":"acme","account_period":"2026-11","record_id":"u-dup","kind":"usage","subject":"cust-1","amount":"1","amount":"2",` +
		`"currency":"USD","meter":"m","quantity":12345678901234567890,"unit":"s","occurred_at":"` + at + `"}`)
	ins := []message.Input{
		{Value: []byte(`{"tenant_id":"acme","account_period":"2026-11","record_id":"g-1","kind":"grant","subject":"cust-1","amount":"100","currency":"USD","occurred_at":"` + at + `"}`)},
		{Value: usage("4")}, {Value: usage("5")}, {Value: dup},
	}
	for i := range ins {
		ins[i].Topic, ins[i].Offset = "usage", int64(i)
	}
	rs, err := s.Settle(context.Background(), "g", s.Decode(ins))
	if err != nil {
		t.Fatal(err)
	}
	if rs[2].CaseID == 0 {
		t.Fatalf("no case for the second u-big: %+v", rs[2])
	}
	dead, err := inspect.New(s).DeadLetters(context.Background(), inspect.DeadLetterFilter{})
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters: %+v, %v", dead, err)
	}
	srv := httptest.NewServer(analyst.Handler(analyst.Config{Store: analyst.StoreOf(s)}))
	t.Cleanup(srv.Close)

	_, page := get(t, srv.URL+"/cases/"+itoa(rs[2].CaseID))
	page = html.UnescapeString(page)
	if n := strings.Count(page, `"finalization_version": 9007199254740993`); n != 2 {
		t.Errorf("case page: finalization_version 9007199254740993 shown %d times, want 2 (stored and incoming):\n%s", n, panes(page))
	}
	_, page = get(t, srv.URL+"/dlq/"+itoa(dead[0].ID))
	page = html.UnescapeString(page)
	for _, want := range []string{`"amount": "1",`, `"amount": "2",`, `"quantity": 12345678901234567890,`} {
		if !strings.Contains(page, want) {
			t.Errorf("dead-letter page lacks %s:\n%s", want, panes(page))
		}
	}
}

// panes is the <pre> blocks of a page, for a failure's message.
func panes(page string) string {
	var out []string
	for _, p := range strings.Split(page, "<pre")[1:] {
		out = append(out, "<pre"+strings.SplitN(p, "</pre>", 2)[0])
	}
	return strings.Join(out, "\n")
}
