package analyst_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/settle/inspect"

	"github.com/chromedp/chromedp"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "rewrite the screenshots in docs/img/ from the browser tests")

// chromium finds Debian's chromium. Under CI (env CI set) a missing
// browser fails the test; elsewhere it skips.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (apt-get install -y chromium; .ci/run does)")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium)")
	return ""
}

// TestBrowserResolveCase drives the pages in headless chromium like an
// analyst: open the queue, filter it to one tenant, open the case, see the
// differing fields marked, accept it as an adjustment, see the case closed,
// and find the adjustment in the account's ledger rows on the explain page.
func TestBrowserResolveCase(t *testing.T) {
	t.Parallel()
	path := chromium(t)
	f := newFixture(t, nil)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // the test machines run as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.WindowSize(1280, 1300),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 45*time.Second)
	defer cancelTimeout()

	start := time.Now()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		defer func() { t.Logf("%6.2fs %s", time.Since(start).Seconds(), what) }()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	get := func(what string, v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	rows := `document.querySelectorAll('#cases tbody tr[data-case]').length`
	caseSel := `a.case-link[href="/cases/` + itoa(f.acmeCase) + `"]`

	do("open the queue", chromedp.Navigate(f.srv.URL+"/cases"), chromedp.WaitVisible(`#cases`))
	queueRows, err := chromedp.Run(ctx, chromedp.Evaluate[int](rows))
	get("count rows", queueRows, err)
	do("filter to acme", chromedp.SetValue(`#filter input[name=tenant]`, "acme"), chromedp.Submit(`#filter`),
		chromedp.WaitVisible(caseSel))
	filteredRows, err := chromedp.Run(ctx, chromedp.Evaluate[int](rows))
	get("count filtered rows", filteredRows, err)
	do("open the case", chromedp.Click(caseSel), chromedp.WaitVisible(`#diff`))
	differing, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#diff tr.differs')].map(r => r.dataset.field)`))
	get("read marked fields", differing, err)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	get("screenshot", shot, err)
	do("accept as an adjustment",
		chromedp.SendKeys(`#accept-form input[name=reason]`, "meter re-read confirms 55"),
		chromedp.SendKeys(`#accept-form input[name=by]`, "ana"),
		chromedp.Click(`#accept`),
		chromedp.WaitVisible(`#resolved-note`))
	status, err := chromedp.Run(ctx, chromedp.Text(`#case-status`))
	get("read status", status, err)
	// The adjustment in the account's rows: explain the resolution.
	do("explain the adjustment", chromedp.Click(`#resolution a`), chromedp.WaitVisible(`section.operation`))
	entries, err := chromedp.Run(ctx, chromedp.Text(`section.operation table.entries tbody`))
	get("read ledger rows", entries, err)
	note, _ := chromedp.Run(ctx, chromedp.Text(`h2`))

	if queueRows != 2 || filteredRows != 1 {
		t.Errorf("queue rows %d, after filtering to acme %d: want 2 then 1", queueRows, filteredRows)
	}
	if strings.Join(differing, ",") != "amount,quantity" {
		t.Errorf("fields marked as differing: %v, want amount, quantity", differing)
	}
	if strings.TrimSpace(status) != "accepted" {
		t.Errorf("case status after accept: %q", status)
	}
	if !strings.Contains(entries, "cust-1 USD") || !strings.Contains(entries, "-15") {
		t.Errorf("adjustment rows on the explain page: %q (%s)", entries, note)
	}
	c, err := inspect.New(f.store).Case(context.Background(), f.acmeCase)
	if err != nil || c.Status != "accepted" || c.Resolution == nil || c.Resolution.By != "ana" {
		t.Errorf("case in the store: %+v, %v", c, err)
	}
	if *updateScreenshot {
		p := filepath.Join("..", "docs", "img", "case-page.png")
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", p, len(shot))
	}
}
