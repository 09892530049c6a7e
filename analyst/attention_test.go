package analyst_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/canary"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

// attentionFixture is the role fixture with more settled: a usage of
// acme's cust-1 in EUR, a correction of cust-1 waiting for the record it
// corrects, and a grant of the canary's tenant.
func attentionFixture(t *testing.T) *roleFixture {
	t.Helper()
	f := newRoleFixture(t)
	at := "2026-11-03T10:00:00Z"
	ins := []message.Input{
		{Value: []byte(`{"tenant_id":"acme","account_period":"2026-11","record_id":"e-1","kind":"usage","subject":"cust-1","amount":"7.50",` +
			`"currency":"EUR","meter":"gpu_seconds","quantity":"7.5","unit":"s","occurred_at":"` + at + `","finalization_version":1}`)},
		{Value: []byte(`{"tenant_id":"acme","account_period":"2026-11","record_id":"c-9","kind":"correction","corrects":"u-404","subject":"cust-1",` +
			`"amount":"9","currency":"USD","meter":"gpu_seconds","quantity":"9","unit":"s","occurred_at":"` + at + `","finalization_version":2}`)},
		{Value: []byte(`{"tenant_id":"` + canary.Tenant + `","account_period":"2026-11","record_id":"cg-1","kind":"grant","subject":"canary-1",` +
			`"amount":"1000","currency":"USD","occurred_at":"` + at + `"}`)},
	}
	for i := range ins {
		ins[i].Topic, ins[i].Partition, ins[i].Offset = "usage", 3, int64(i)
	}
	rs, err := f.store.Settle(context.Background(), "g", f.store.Decode(ins))
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Outcome != message.OutcomeSettled || rs[1].Outcome != message.OutcomeWaiting || rs[2].Outcome != message.OutcomeSettled {
		t.Fatalf("fixture: %+v", rs)
	}
	return f
}

// TestOverviewSettledByCurrency: the overview counts what settled in its
// window per hour and currency, with what it charged and credited; the
// canary's tenant is left out; a token of acme sees acme's alone; the
// waiting card says how old the oldest waiting record is. (Seen failing
// before the overview had a settled section: no "settled" in its answer.)
func TestOverviewSettledByCurrency(t *testing.T) {
	t.Parallel()
	f := attentionFixture(t)
	totals := func(who string) map[string][3]string {
		var ov struct {
			Settled   []inspect.SettledHour `json:"settled"`
			Attention inspect.Attention     `json:"attention"`
		}
		getJSON(t, f, who, "/api/overview", &ov)
		out := map[string][3]string{}
		for _, h := range ov.Settled {
			if h.Hour.IsZero() {
				t.Errorf("%s: an hour without its time: %+v", who, h)
			}
			n := out[h.Currency]
			// One hour in this fixture: each currency has one row.
			out[h.Currency] = [3]string{n[0] + itoa(h.Settled), h.Charged, h.Credited}
		}
		if ov.Attention.Waiting != 1 {
			t.Errorf("%s: %d waiting, want acme's correction", who, ov.Attention.Waiting)
		}
		return out
	}
	// rita, every tenant: acme's grant of 100, usage of 40 and 7.50 EUR,
	// globex's usage of 3; not the canary's grant of 1000.
	want := map[string][3]string{"USD": {"3", "43", "100"}, "EUR": {"1", "7.5", "0"}}
	if got := totals("rita"); !equalTotals(got, want) {
		t.Errorf("rita's settled totals: %v, want %v", got, want)
	}
	// ana, acme only.
	want = map[string][3]string{"USD": {"2", "40", "100"}, "EUR": {"1", "7.5", "0"}}
	if got := totals("ana"); !equalTotals(got, want) {
		t.Errorf("ana's settled totals: %v, want %v", got, want)
	}
	code, body := f.call(t, "ana", "GET", "/", "", "")
	for _, s := range []string{`id="settled"`, `data-currency="EUR"`, `7.5 <small>charged</small>`, `40 <small>charged</small>`,
		`100 credited`, "waiting records, oldest "} {
		if code != 200 || !strings.Contains(body, s) {
			t.Errorf("ana's overview: %d, does not show %q: %s", code, s, trim([]byte(body)))
		}
	}
	if strings.Contains(body, "43 <small>") || strings.Contains(body, canary.Tenant) {
		t.Errorf("ana's overview shows another tenant's amounts: %s", trim([]byte(body)))
	}
	// The canary's own numbers are there for a token that names it.
	// A record waiting for two hours is on the list of what to look at
	// first, linked to its explain page (seen failing without the link).
	if _, err := f.store.Pool().Exec(context.Background(), `UPDATE waiting SET since = now() - interval '2 hours' WHERE record_id = 'c-9'`); err != nil {
		t.Fatal(err)
	}
	_, body = f.call(t, "ana", "GET", "/", "", "")
	if !strings.Contains(body, `<li><a href="/explain?period=2026-11&amp;record=c-9&amp;tenant=acme">1 record waiting for their target, the oldest since 2 h ago</a></li>`) {
		t.Errorf("ana's overview does not link the record waiting for 2 hours: %s", trim([]byte(body)))
	}
	if s, err := f.cfg.Store.SettledByHour(context.Background(), canary.Tenant, time.Now().Add(-time.Hour)); err != nil || len(s) != 1 || s[0].Credited != "1000" {
		t.Errorf("the canary's settled hours when asked for by name: %+v, %v", s, err)
	}
}

func equalTotals(a, b map[string][3]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestAccountPageAttention: the account page lists its subject's open
// cases (linked, with the amounts on both sides) and its records waiting
// for their target, oldest first; another subject's are not there; the
// API answers the same. (Seen failing before the page had them.)
func TestAccountPageAttention(t *testing.T) {
	t.Parallel()
	f := attentionFixture(t)
	code, body := f.call(t, "ana", "GET", "/accounts/acme/cust-1", "", "")
	for _, s := range []string{`id="account-cases"`, `href="/cases/` + itoa(f.acmeCase) + `"`, "fingerprint_mismatch", "55 USD", "40 USD",
		`id="account-waiting"`, "2026-11 / c-9", "2026-11 / u-404", "Statement:"} {
		if code != 200 || !strings.Contains(body, s) {
			t.Errorf("acme's cust-1 page: %d, does not show %q: %s", code, s, trim([]byte(body)))
		}
	}
	if strings.Contains(body, `href="/cases/`+itoa(f.globexCase)+`"`) {
		t.Errorf("acme's cust-1 page lists globex's case %d", f.globexCase)
	}
	var acct struct {
		OpenCases []inspect.OpenCase      `json:"open_cases"`
		Waiting   []inspect.WaitingRecord `json:"waiting"`
	}
	getJSON(t, f, "ana", "/api/accounts/acme/cust-1", &acct)
	if len(acct.OpenCases) != 1 || acct.OpenCases[0].ID != f.acmeCase || acct.OpenCases[0].IncomingAmount != "55" || acct.OpenCases[0].StoredAmount != "40" {
		t.Errorf("cust-1's open cases: %+v, want case %d, 55 against 40", acct.OpenCases, f.acmeCase)
	}
	if len(acct.Waiting) != 1 || acct.Waiting[0].RecordID != "c-9" || acct.Waiting[0].TargetRecord != "u-404" {
		t.Errorf("cust-1's waiting records: %+v, want c-9 waiting for u-404", acct.Waiting)
	}
	// globex's cust-9 has its own case and nothing waiting.
	getJSON(t, f, "rita", "/api/accounts/globex/cust-9", &acct)
	if len(acct.OpenCases) != 1 || acct.OpenCases[0].ID != f.globexCase || len(acct.Waiting) != 0 {
		t.Errorf("globex's cust-9: %+v", acct)
	}
}

// TestQueueSaysWhatDiffers: each case of the queue names the fields whose
// values differ between the stored and the incoming record, in the API and
// on the page (seen failing before the queue read them: no "differs").
func TestQueueSaysWhatDiffers(t *testing.T) {
	t.Parallel()
	f := newRoleFixture(t)
	var page inspect.CasePage
	getJSON(t, f, "rita", "/api/cases?tenant=acme", &page)
	if len(page.Cases) != 1 || strings.Join(page.Cases[0].Differs, " ") != "amount quantity" {
		t.Errorf("acme's case: %+v, want amount and quantity differing (40 against 55)", page.Cases)
	}
	code, body := f.call(t, "rita", "GET", "/cases?tenant=acme", "", "")
	if code != 200 || !strings.Contains(body, `<td class="differs">amount, quantity</td>`) {
		t.Errorf("the queue page does not say amount and quantity differ: %d %s", code, trim([]byte(body)))
	}
}
