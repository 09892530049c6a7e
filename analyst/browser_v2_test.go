package analyst_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

// busyFixture is the v2 fixture with a day of traffic behind it: three
// tenants, grants and usage with duplicates, conflicts, waiting refunds and
// dead letters, the deliveries spread over the last 24 hours and the open
// cases over a week, so that the pages (and their screenshots) show what
// an analyst sees on a working service.
func busyFixture(t *testing.T) *v2Fixture {
	t.Helper()
	f := newV2Fixture(t)
	ctx := context.Background()
	var ins []message.Input
	off := int64(100)
	add := func(v []byte) {
		ins = append(ins, message.Input{Topic: "usage", Partition: 1, Offset: off, Value: v})
		off++
	}
	at := "2026-11-03T10:00:00Z"
	for _, tenant := range []string{"acme", "globex", "initech"} {
		for s := 1; s <= 4; s++ {
			add([]byte(`{"tenant_id":"` + tenant + `","account_period":"2026-11","record_id":"grant-` + fmt.Sprint(s) + `","kind":"grant","subject":"sub-` +
				fmt.Sprint(s) + `","amount":"5000","currency":"USD","occurred_at":"` + at + `"}`))
		}
	}
	for i := range 180 {
		tenant := []string{"acme", "globex", "initech"}[i%3]
		id, subject, amount := fmt.Sprintf("ev-%03d", i), fmt.Sprintf("sub-%d", 1+i%4), fmt.Sprint(3+i%11)
		add(usageRecord(tenant, id, subject, amount, at))
		switch {
		case i%5 == 0: // a redelivery by the producer: a duplicate
			add(usageRecord(tenant, id, subject, amount, at))
		case i%29 == 3: // the same record_id with another amount: a conflict
			add(usageRecord(tenant, id, subject, amount+"1", at))
		}
		if i%37 == 5 { // a refund that arrives before its usage: waiting
			add([]byte(`{"tenant_id":"` + tenant + `","account_period":"2026-11","record_id":"late-` + fmt.Sprint(i) + `","kind":"refund","subject":"` + subject +
				`","amount":"1","currency":"USD","occurred_at":"` + at + `"}`))
		}
		if i%61 == 7 {
			add([]byte(`{"tenant_id":"` + tenant + `","record_id":` + fmt.Sprint(i) + `}`)) // no period, not a string: dead letter
		}
	}
	// globex's sub-2 also corrects a usage and holds an amount.
	add([]byte(`{"tenant_id":"globex","account_period":"2026-11","record_id":"ev-001-fix","kind":"correction","corrects":"ev-001","subject":"sub-2",` +
		`"amount":"9","currency":"USD","meter":"gpu_seconds","quantity":"9","unit":"s","occurred_at":"` + at + `","finalization_version":2}`))
	add([]byte(`{"tenant_id":"globex","account_period":"2026-11","record_id":"hold-7","kind":"hold","subject":"sub-2","amount":"250",` +
		`"currency":"USD","occurred_at":"` + at + `","expires_at":"2027-01-01T00:00:00Z"}`))
	// And a correction of a usage not yet seen: it waits.
	add([]byte(`{"tenant_id":"globex","account_period":"2026-11","record_id":"ev-900-fix","kind":"correction","corrects":"ev-900","subject":"sub-2",` +
		`"amount":"4","currency":"USD","meter":"gpu_seconds","quantity":"4","unit":"s","occurred_at":"` + at + `","finalization_version":2}`))
	rs, err := f.store.Settle(ctx, "g", f.store.Decode(ins))
	if err != nil {
		t.Fatal(err)
	}
	if last := rs[len(rs)-3:]; last[0].Outcome != message.OutcomeSettled || last[1].Outcome != message.OutcomeSettled || last[2].Outcome != message.OutcomeWaiting {
		t.Fatalf("correction, hold and waiting correction: %+v", last)
	}
	// A day of traffic, and cases of every age: deliveries are append-only,
	// so this test database's triggers are off for the one transaction that
	// ages them.
	tx, err := f.store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{
		`SET LOCAL session_replication_role = replica`,
		`UPDATE identities SET committed_at = date_trunc('hour', now()) - make_interval(hours => (("offset" * 7 + "offset" / 9) % 24)::int) + make_interval(mins => ("offset" % 50)::int) WHERE partition = 1`,
		`UPDATE delivery_repeats SET at = date_trunc('hour', now()) - make_interval(hours => (("offset" * 7 + "offset" / 9) % 24)::int) + make_interval(mins => ("offset" % 50)::int) WHERE partition = 1`,
		`UPDATE conflict_cases SET opened_at = now() - make_interval(hours => ((id * 13) % 170)::int) - interval '20 minutes' WHERE status = 'open' AND id % 3 <> 0`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	dead, err := inspect.New(f.store).DeadLetters(ctx, inspect.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	f.dead = dead
	return f
}

// browser starts headless chromium at 1280x800 for one test.
func browser(t *testing.T) (context.Context, func(what string, steps ...chromedp.Action[chromedp.Void])) {
	t.Helper()
	path := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-default-apps", true), chromedp.Flag("disable-extensions", true),
		chromedp.Flag("hide-scrollbars", true), chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelTimeout)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("browser: viewport: %v", err)
	}
	start := time.Now()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		defer func() { t.Logf("%6.2fs %s", time.Since(start).Seconds(), what) }()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	return ctx, do
}

// value runs a step that returns a value, failing the test on an error.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// screenshots are what -update-screenshot writes to docs/img/.
type screenshots map[string][]byte

func (s screenshots) take(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	s[name] = value(t, ctx, "screenshot "+name, chromedp.CaptureScreenshot())
}

func (s screenshots) write(t *testing.T) {
	t.Helper()
	if !*updateScreenshot {
		return
	}
	for name, png := range s {
		p := filepath.Join("..", "docs", "img", name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", p, len(png))
	}
}

// TestBrowserPageV2 drives the page v2 in headless chromium, without a
// line of script of its own on the page: search from the header box to an
// account, follow a settlement to its record, replay the dead letters
// (dry run, then confirm), and read the overview's charts, light and dark.
func TestBrowserPageV2(t *testing.T) {
	t.Parallel()
	f := busyFixture(t)
	ctx, do := browser(t)
	shots := screenshots{}
	bg := context.Background()

	// Search: sub-2 is an account of three tenants, so a list.
	do("search from the header", chromedp.Navigate(f.srv.URL+"/"), chromedp.WaitVisible(`#search-q`),
		chromedp.SendKeys(`#search-q`, "sub-2"), chromedp.Submit(`#search-q`), chromedp.WaitVisible(`#hits`))
	kinds := value(t, ctx, "read hits", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#hits tr[data-kind]')].map(r => r.dataset.kind + ':' + r.cells[1].textContent)`))
	if !slices.Equal(kinds, []string{"account:acme", "account:globex", "account:initech"}) {
		t.Errorf("hits for sub-2: %v", kinds)
	}
	do("search a record id", chromedp.SetValue(`#search-form input[name=q]`, "ev-003"), chromedp.Submit(`#search-form`),
		chromedp.WaitVisible(`#hits tr[data-kind="record"]`))
	shots.take(t, ctx, "page-search.png")
	recHits := value(t, ctx, "count", chromedp.Evaluate[int](`document.querySelectorAll('#hits tr[data-kind]').length`))
	if recHits != 2 { // ev-003: its conflict case and the record
		t.Errorf("hits for ev-003: %d, want the case and the record", recHits)
	}

	// The account page, from the search.
	do("open globex's sub-2", chromedp.Navigate(f.srv.URL+"/search?q=sub-2&tenant=globex"), chromedp.WaitVisible(`#balance-USD`))
	views, err := inspect.New(f.store).Balances(bg, "globex", "sub-2", 10)
	if err != nil || len(views) != 1 {
		t.Fatalf("balances: %v %v", views, err)
	}
	bal := value(t, ctx, "read balance", chromedp.Text(`#balance-USD`))
	avail := value(t, ctx, "read available", chromedp.Text(`#available-USD`))
	seqs := value(t, ctx, "read sequence", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#settlements-USD tr[data-seq]')].map(r => r.dataset.seq)`))
	shownCases := value(t, ctx, "count open cases", chromedp.Evaluate[int](`document.querySelectorAll('#account-cases tr[data-case]').length`))
	shownWaiting := value(t, ctx, "read waiting", chromedp.Text(`#account-waiting tbody`))
	shots.take(t, ctx, "page-account.png")
	att, err := inspect.New(f.store).SubjectAttention(bg, "globex", "sub-2")
	if err != nil || len(att.OpenCases) == 0 || shownCases != len(att.OpenCases) || !strings.Contains(shownWaiting, "ev-900-fix") {
		t.Errorf("account page: %d open cases shown, the store's %+v (%v); waiting %q, want ev-900-fix", shownCases, att, err, shownWaiting)
	}
	if bal != views[0].Balance+" USD" || avail != views[0].Available+" USD" {
		t.Errorf("account page: balance %q available %q, store %s / %s", bal, avail, views[0].Balance, views[0].Available)
	}
	if len(seqs) == 0 || seqs[0] != fmt.Sprint(views[0].Sequence) {
		t.Errorf("settlement sequence on the page %v, the account's sequence %d", seqs, views[0].Sequence)
	}
	do("follow the newest settlement to its record", chromedp.Click(`#settlements-USD tbody tr:first-child td:nth-child(2) a`),
		chromedp.WaitVisible(`section.operation`))
	heading := value(t, ctx, "read heading", chromedp.Text(`main h2`))
	if !strings.HasPrefix(heading, "globex / 2026-11 / ") {
		t.Errorf("explain after the settlement link: %q", heading)
	}

	// Dead letters: the dry run lists them all, the confirmation replays them.
	do("open the dead letters", chromedp.Navigate(f.srv.URL+"/dlq"), chromedp.WaitVisible(`#replay-filtered`))
	do("dry run", chromedp.Click(`#replay-filtered`), chromedp.WaitVisible(`#would-replay`))
	listed := value(t, ctx, "count listed", chromedp.Evaluate[int](`document.querySelectorAll('#would-replay tr[data-id]').length`))
	shots.take(t, ctx, "page-dlq-replay.png")
	if got := f.replayer.ids(); len(got) != 0 {
		t.Fatalf("the dry run replayed %v", got)
	}
	do("confirm", chromedp.Click(`#confirm-replay`), chromedp.WaitVisible(`#replay-done`))
	var want []int64
	for _, d := range f.dead {
		want = append(want, d.ID)
	}
	if got := f.replayer.ids(); listed != len(f.dead) || !slices.Equal(got, want) {
		t.Errorf("listed %d of %d dead letters; replayed %v, want %v", listed, len(f.dead), got, want)
	}
	do("open one dead letter", chromedp.Navigate(fmt.Sprintf("%s/dlq/%d", f.srv.URL, f.dead[0].ID)), chromedp.WaitVisible(`#headers`))
	hdrs := value(t, ctx, "read headers", chromedp.Text(`#headers tbody`))
	if !strings.Contains(hdrs, "traceparent") {
		t.Errorf("dead letter headers: %q", hdrs)
	}

	// The overview: a bar for every hour with traffic, open cases by age.
	do("open the overview", chromedp.Navigate(f.srv.URL+"/"), chromedp.WaitVisible(`#outcome-chart`))
	drawn := value(t, ctx, "sum bars", chromedp.Evaluate[int](`[...document.querySelectorAll('#outcome-chart g.bar')].reduce((n, g) => n + Number(g.dataset.total), 0)`))
	ages := value(t, ctx, "sum ages", chromedp.Evaluate[int](`[...document.querySelectorAll('#age-chart g.age')].reduce((n, g) => n + Number(g.dataset.count), 0)`))
	hours := value(t, ctx, "hours with traffic", chromedp.Evaluate[int](`[...document.querySelectorAll('#outcome-chart g.bar')].filter(g => g.dataset.total > 0).length`))
	barH := value(t, ctx, "bar heights", chromedp.Evaluate[float64](`Math.max(...[...document.querySelectorAll('#outcome-chart rect')].map(r => r.getBBox().height))`))
	settledShown := value(t, ctx, "settled cards", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#settled .settled-total')].map(c => c.dataset.currency + ' ' + c.dataset.settled + ' ' + c.dataset.charged)`))
	shots.take(t, ctx, "page-overview.png")
	var settledWant []string
	if err := f.store.Pool().QueryRow(bg, `SELECT array_agg(c || ' ' || n || ' ' || charged ORDER BY c) FROM (
		SELECT a.currency AS c, count(DISTINCT i.id) AS n, sum(-l.amount) FILTER (WHERE l.bucket = 'balance' AND l.amount < 0) AS charged
		  FROM identities i JOIN ledger_entries l ON l.identity_id = i.id JOIN accounts a ON a.id = l.account_id
		 WHERE i.outcome = 'settled' AND i.committed_at >= date_trunc('hour', now() - interval '24 hours') GROUP BY 1) x`).Scan(&settledWant); err != nil {
		t.Fatalf("sum settled: %v", err)
	}
	if !slices.Equal(settledShown, settledWant) {
		t.Errorf("overview's settled cards %v, the ledger's %v", settledShown, settledWant)
	}
	var deliveries, open int
	if err := f.store.Pool().QueryRow(bg, `SELECT count(*) FROM deliveries WHERE at >= date_trunc('hour', now() - interval '24 hours')`).Scan(&deliveries); err != nil {
		t.Fatalf("count deliveries: %v", err)
	}
	if err := f.store.Pool().QueryRow(bg, `SELECT count(*) FROM conflict_cases WHERE status = 'open'`).Scan(&open); err != nil {
		t.Fatalf("count open cases: %v", err)
	}
	if drawn != deliveries || ages != open || hours < 20 || barH <= 0 {
		t.Errorf("overview: bars sum to %d of %d deliveries over %d hours (tallest %.0f); age bars %d of %d open cases",
			drawn, deliveries, hours, barH, ages, open)
	}
	// Dark mode follows the system's preference.
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	do("reload dark", chromedp.Navigate(f.srv.URL+"/"), chromedp.WaitVisible(`#outcome-chart`))
	bgColor := value(t, ctx, "read background", chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	shots.take(t, ctx, "page-overview-dark.png")
	if bgColor != "rgb(12, 17, 29)" {
		t.Errorf("dark mode background %q", bgColor)
	}
	shots.write(t)
}

var _ = httptest.NewServer
var _ = analyst.Handler
