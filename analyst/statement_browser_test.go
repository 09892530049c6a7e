package analyst_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// TestBrowserStatement drives the statement page in headless chromium:
// ask for a tenant's period, read each account's lines and closing, and
// find them equal to the balances, in the order a controller reads them,
// with the record settled after the period closed shown apart as late.
// cust-1 has grants, charges on two meters, a correction, a reversal, a
// refund, a reclaim, a partial capture, a release and an expiry, each its
// own line, and the page's lines sum to its closing balance and held.
func TestBrowserStatement(t *testing.T) {
	t.Parallel()
	path := chromium(t)
	s := settletest.NewStore(t, settle.Config{})
	ctx := context.Background()
	expires := time.Now().Add(time.Second)
	const at = `"account_period":"2026-11","occurred_at":"2026-11-03T10:00:00Z","tenant_id":"acme"`
	vals := []string{
		`{` + at + `,"record_id":"g-1","kind":"grant","subject":"cust-1","amount":"100","currency":"USD"}`,
		`{` + at + `,"record_id":"u-1","kind":"usage","subject":"cust-1","amount":"40","currency":"USD","meter":"gpu_seconds","quantity":"40","unit":"s","finalization_version":1}`,
		`{` + at + `,"record_id":"c-1","kind":"correction","corrects":"u-1","subject":"cust-1","amount":"30","currency":"USD","meter":"gpu_seconds","quantity":"30","unit":"s","finalization_version":2}`,
		`{` + at + `,"record_id":"u-2","kind":"usage","subject":"cust-1","amount":"7","currency":"USD","meter":"storage_gb","quantity":"7","unit":"GB","finalization_version":1}`,
		`{` + at + `,"record_id":"u-2","kind":"refund","subject":"cust-1"}`,
		`{` + at + `,"record_id":"u-2","kind":"reclaim","subject":"cust-1"}`,
		`{` + at + `,"record_id":"h-1","kind":"hold","subject":"cust-1","amount":"20","currency":"USD"}`,
		`{` + at + `,"record_id":"u-3","kind":"usage","subject":"cust-1","amount":"12","currency":"USD","meter":"gpu_seconds","quantity":"12","unit":"s","finalization_version":1,"hold_id":"h-1"}`,
		`{` + at + `,"record_id":"u-4","kind":"usage","subject":"cust-1","amount":"5","currency":"USD","meter":"gpu_seconds","quantity":"5","unit":"s","finalization_version":1}`,
		`{` + at + `,"record_id":"rv-1","kind":"reversal","corrects":"u-4","subject":"cust-1","currency":"USD"}`,
		`{` + at + `,"record_id":"h-2","kind":"hold","subject":"cust-1","amount":"10","currency":"USD"}`,
		`{` + at + `,"record_id":"h-2","kind":"hold_release","subject":"cust-1"}`,
		`{` + at + `,"record_id":"h-3","kind":"hold","subject":"cust-1","amount":"6","currency":"USD","expires_at":"` + expires.UTC().Format(time.RFC3339Nano) + `"}`,
		`{` + at + `,"record_id":"g-2","kind":"grant","subject":"cust-2","amount":"9","currency":"EUR"}`,
	}
	var ins []message.Input
	for i, v := range vals {
		ins = append(ins, message.Input{Topic: "usage", Offset: int64(i), Value: []byte(v)})
	}
	rs, err := s.Settle(ctx, "g", s.Decode(ins))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Outcome != message.OutcomeSettled {
			t.Fatalf("setup: %s: %+v", vals[i], r)
		}
	}
	time.Sleep(time.Until(expires) + 100*time.Millisecond)
	if n, err := s.ExpireHolds(ctx); err != nil || n != 1 {
		t.Fatalf("expire holds: %d, %v", n, err)
	}
	if _, err := s.ClosePeriod(ctx, "acme", "2026-11", "fin"); err != nil {
		t.Fatal(err)
	}
	late := `{` + at + `,"record_id":"g-late","kind":"grant","subject":"cust-1","amount":"5","currency":"USD"}`
	if rs, err := s.Settle(ctx, "g", s.Decode([]message.Input{{Topic: "usage", Offset: 99, Value: []byte(late)}})); err != nil || rs[0].Outcome != message.OutcomeSettled {
		t.Fatalf("late grant: %v %+v", err, rs)
	}
	srv := httptest.NewServer(analyst.Handler(analyst.Config{Store: analyst.StoreOf(s)}))
	t.Cleanup(srv.Close)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-default-apps", true), chromedp.Flag("disable-extensions", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	bctx, cancelTimeout := context.WithTimeout(bctx, 45*time.Second)
	defer cancelTimeout()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	do("open the statement page from the nav", chromedp.Navigate(srv.URL+"/"), chromedp.Click(`nav a[href="/statement"]`), chromedp.WaitVisible(`#statement-form`))
	do("ask for acme 2026-11",
		chromedp.SetValue(`#statement-form input[name=tenant]`, "acme"),
		chromedp.SetValue(`#statement-form input[name=period]`, "2026-11"),
		chromedp.Submit(`#statement-form`),
		chromedp.WaitVisible(`section.statement-account`))
	type acct struct {
		Subject, Currency, Ties, Closing, ClosingHeld, Now string
		Lines                                              []string
		Late                                               []string
		Buckets                                            []string // every line, late ones too: bucket and amount
		Opening                                            []string // balance, held
	}
	accounts, err := chromedp.Run(bctx, chromedp.Evaluate[[]acct](`[...document.querySelectorAll('section.statement-account')].map(s => ({
		Subject: s.dataset.subject, Currency: s.dataset.currency, Ties: s.dataset.ties,
		Closing: s.querySelector('[data-closing=balance]').textContent.trim(),
		ClosingHeld: s.querySelector('[data-closing=held]').textContent.trim(),
		Now: s.querySelector('[data-now=balance]').textContent.trim(),
		Buckets: [...s.querySelectorAll('tr.line')].map(r => r.children[2].textContent.trim() + ' ' + r.querySelector('.amount').textContent.trim()),
		Opening: [...s.querySelectorAll('tr.opening td.num')].map(c => c.textContent.trim()),
		Lines: [...s.querySelectorAll('tbody:not(.late) tr.line')].map(r => r.dataset.category + ' ' + r.dataset.meter + ' ' + r.querySelector('.amount').textContent.trim()),
		Late: [...s.querySelectorAll('tbody.late tr.line')].map(r => r.dataset.category + ' ' + r.querySelector('.amount').textContent.trim()),
	}))`))
	if err != nil {
		t.Fatalf("browser: read the statement: %v", err)
	}
	views, err := inspect.New(s).Balances(ctx, "acme", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(accounts) != len(views) {
		t.Fatalf("page shows %d accounts, settle balance %d: %+v", len(accounts), len(views), accounts)
	}
	for i, v := range views {
		a := accounts[i]
		if a.Subject != v.Subject || a.Currency != v.Currency || a.Closing != v.Balance || a.Now != v.Balance || a.Ties != "true" {
			t.Errorf("page account %+v; settle balance: %s %s %s", a, v.Subject, v.Currency, v.Balance)
		}
	}
	// cust-1: 100 granted, 30 for u-1 after its correction, 5 for u-4
	// reversed, 7 refunded and reclaimed, 12 captured from a hold of 20
	// (the other 8 released by the capture), a hold of 10 released, one of
	// 6 expired, 5 granted late.
	lines := strings.Join(accounts[0].Lines, "; ")
	for _, want := range []string{"grant  100", "charge gpu_seconds -57", "correction gpu_seconds 10", "reversal  5", "charge storage_gb -7",
		"refund  7", "reclaim  -7", "hold_placed  36", "hold_captured  -12", "hold_released_at_capture  -8", "hold_released  -10", "hold_expired  -6"} {
		if !strings.Contains(lines, want) {
			t.Errorf("cust-1 lines %q lack %q", lines, want)
		}
	}
	// In the order a controller reads them, top to bottom.
	var order []string
	for _, l := range accounts[0].Lines {
		order = append(order, strings.Join(strings.Fields(l)[:len(strings.Fields(l))-1], " "))
	}
	if got, want := strings.Join(order, "; "), "charge gpu_seconds; charge storage_gb; correction gpu_seconds; reversal; refund; reclaim; grant; hold_placed; hold_captured; hold_released_at_capture; hold_released; hold_expired"; got != want {
		t.Errorf("cust-1's lines in the order\n %s\nwant\n %s", got, want)
	}
	if len(accounts[0].Lines) != 12 {
		t.Errorf("cust-1 has %d on-time lines, want 12 (the late grant apart): %q", len(accounts[0].Lines), lines)
	}
	// Every account's lines, as the page shows them, sum from its opening
	// to its closing balance and held.
	for _, a := range accounts {
		if len(a.Opening) != 2 {
			t.Fatalf("%s %s: opening cells %q", a.Subject, a.Currency, a.Opening)
		}
		sum := map[string]money.Dec{"balance": money.MustParse(a.Opening[0]), "held": money.MustParse(a.Opening[1])}
		for _, l := range a.Buckets {
			f := strings.Fields(l)
			if len(f) != 2 || (f[0] != "balance" && f[0] != "held") {
				t.Fatalf("%s %s: line %q is not a bucket and an amount", a.Subject, a.Currency, l)
			}
			sum[f[0]] = sum[f[0]].Add(money.MustParse(f[1]))
		}
		if sum["balance"].String() != money.MustParse(a.Closing).String() || sum["held"].String() != money.MustParse(a.ClosingHeld).String() {
			t.Errorf("%s %s: the page's lines sum to %s, held %s; its closing is %s, held %s", a.Subject, a.Currency, sum["balance"], sum["held"], a.Closing, a.ClosingHeld)
		}
	}
	if accounts[0].ClosingHeld != "0" {
		t.Errorf("cust-1 closing held %s, want 0 (captured, released and expired)", accounts[0].ClosingHeld)
	}
	if strings.Join(accounts[0].Late, ";") != "grant 5" || accounts[0].Closing != "56" {
		t.Errorf("cust-1 late lines %v, closing %s: want grant 5 apart and closing 56", accounts[0].Late, accounts[0].Closing)
	}
}
