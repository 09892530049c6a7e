package analyst_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/settlehq/settle/settle/inspect"
)

// signIn makes every request of the browser's tab carry who's token.
func signIn(t *testing.T, ctx context.Context, who string) {
	t.Helper()
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("browser: network: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Authorization": "Bearer " + tokenOf(who)}}); err != nil {
		t.Fatalf("browser: sign in as %s: %v", who, err)
	}
}

// TestBrowserRoles drives the page in headless chromium as three analysts.
// A reader (rita) sees her name and role in the header and a case page
// without a resolve form; a resolver (rob) rejects the case through the
// form and the case records rob, not the name a form could state; a reader
// of acme alone (ana) sees only acme's cases on the queue, and globex's
// case page is "not found" to her.
func TestBrowserRoles(t *testing.T) {
	t.Parallel()
	f := newRoleFixture(t)
	cid, gid := itoa(f.acmeCase), itoa(f.globexCase)

	ctx, do := browser(t)
	signIn(t, ctx, "rita")
	do("rita opens acme's case", chromedp.Navigate(f.srv.URL+"/cases/"+cid), chromedp.WaitVisible(`#read-only`))
	forms := value(t, ctx, "count rita's resolve forms", chromedp.Evaluate[int](`document.querySelectorAll('#accept-form, #reject-form').length`))
	me := value(t, ctx, "read rita's header", chromedp.Text(`#me`))
	if forms != 0 || !strings.Contains(me, "rita · read · every tenant") {
		t.Errorf("rita's case page: %d resolve forms, header %q; want none and rita · read", forms, me)
	}

	rctx, rcancel := chromedp.NewContext(ctx) // a tab of its own: rob's token
	defer rcancel()
	signIn(t, rctx, "rob")
	if err := chromedp.Do(rctx,
		chromedp.Navigate(f.srv.URL+"/cases/"+cid), chromedp.WaitVisible(`#reject-form`),
		chromedp.SendKeys(`#reject-form input[name=reason]`, "duplicate of u-7"),
		chromedp.Click(`#reject`), chromedp.WaitVisible(`#resolved-note`)); err != nil {
		t.Fatalf("browser: rob rejects the case: %v", err)
	}
	c, err := inspect.New(f.store).Case(context.Background(), f.acmeCase)
	if err != nil || c.Status != inspect.CaseRejected || c.Resolution == nil || c.Resolution.By != "rob" {
		t.Errorf("after rob's reject the case is %+v (%v): want rejected by rob", c, err)
	}

	actx, acancel := chromedp.NewContext(ctx)
	defer acancel()
	signIn(t, actx, "ana")
	if err := chromedp.Do(actx, chromedp.Navigate(f.srv.URL+"/cases?status=all"), chromedp.WaitVisible(`#cases`)); err != nil {
		t.Fatalf("browser: ana opens the queue: %v", err)
	}
	tenants := value(t, actx, "read ana's queue", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#cases tbody tr[data-case]')].map(r => r.textContent.includes('globex') ? 'globex' : 'acme')`))
	if len(tenants) == 0 || strings.Contains(strings.Join(tenants, ","), "globex") {
		t.Errorf("ana's queue rows: %v, want acme's only", tenants)
	}
	if err := chromedp.Do(actx, chromedp.Navigate(f.srv.URL+"/cases/"+gid), chromedp.WaitVisible(`main`)); err != nil {
		t.Fatalf("browser: ana opens globex's case: %v", err)
	}
	title := value(t, actx, "read the title", chromedp.Title())
	if !strings.Contains(title, "Not Found") {
		t.Errorf("globex's case page to ana: title %q, want Not Found", title)
	}
}

// TestBrowserAttention drives the overview and the account page in
// headless chromium as a reader of every tenant (rita) and a reader of
// acme alone (ana): the settled cards give each currency's settled count
// and amounts of what the token sees (never the canary's), and the account
// page lists its subject's open case, linked, and its waiting correction.
func TestBrowserAttention(t *testing.T) {
	t.Parallel()
	f := attentionFixture(t)
	ctx, do := browser(t)
	cards := func(ctx context.Context, who string) []string {
		return value(t, ctx, "read "+who+"'s settled cards", chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('#settled .settled-total')].map(c => c.dataset.currency + ' ' + c.innerText.replace(/\s+/g, ' ').trim())`))
	}
	signIn(t, ctx, "rita")
	do("rita opens the overview", chromedp.Navigate(f.srv.URL+"/"), chromedp.WaitVisible(`#settled`))
	want := []string{"EUR EUR: 1 settled, 24 h 7.5 charged 0 credited", "USD USD: 3 settled, 24 h 43 charged 100 credited"}
	if got := cards(ctx, "rita"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("rita's settled cards: %q, want %q", got, want)
	}
	actx, acancel := chromedp.NewContext(ctx)
	defer acancel()
	signIn(t, actx, "ana")
	if err := chromedp.Do(actx, chromedp.Navigate(f.srv.URL+"/"), chromedp.WaitVisible(`#settled`)); err != nil {
		t.Fatalf("browser: ana opens the overview: %v", err)
	}
	want = []string{"EUR EUR: 1 settled, 24 h 7.5 charged 0 credited", "USD USD: 2 settled, 24 h 40 charged 100 credited"}
	if got := cards(actx, "ana"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("ana's settled cards: %q, want %q", got, want)
	}
	if err := chromedp.Do(actx, chromedp.Navigate(f.srv.URL+"/accounts/acme/cust-1"), chromedp.WaitVisible(`#account-cases`)); err != nil {
		t.Fatalf("browser: ana opens cust-1: %v", err)
	}
	casesShown := value(t, actx, "read cust-1's cases", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#account-cases tr[data-case]')].map(r => r.dataset.case)`))
	waiting := value(t, actx, "read cust-1's waiting", chromedp.Text(`#account-waiting tbody`))
	if strings.Join(casesShown, ",") != itoa(f.acmeCase) || !strings.Contains(waiting, "c-9") || !strings.Contains(waiting, "u-404") {
		t.Errorf("cust-1's page to ana: cases %v, waiting %q; want case %d and c-9 waiting for u-404", casesShown, waiting, f.acmeCase)
	}
	if err := chromedp.Do(actx, chromedp.Click(`#account-cases a[href^="/cases/"]`), chromedp.WaitVisible(`#read-only`)); err != nil {
		t.Errorf("browser: ana follows cust-1's case to its page (read only): %v", err)
	}
}
