package analyst_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/service"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
)

// pageResender is the service's resend (service.ResendDeadLetter) on a
// client of its own, as the page of a running service has it.
type pageResender struct {
	cl    *kgo.Client
	store *settle.Store
}

func (p pageResender) Resend(ctx context.Context, d inspect.DeadLetter, edits []inspect.FieldEdit, by, reason string) (*analyst.Resent, error) {
	r, err := service.ResendDeadLetter(ctx, p.cl, p.store, service.Resend{Letter: d, Edits: edits, By: by, Reason: reason})
	if err != nil {
		return nil, err
	}
	return &analyst.Resent{DeadLetterID: r.DeadLetterID, EditID: r.EditID, EditedBy: r.By, At: r.At, Diff: r.Diff, To: r.To}, nil
}

// TestBrowserResendDeadLetter drives the letter page's correction in
// headless chromium: a reader (rita) sees no form; an operator (otto)
// types a change and a reason and submits; the page comes back (303) with
// the correction listed under otto, its diff and where its record went,
// and the broker holds that record: the corrected value, the key a
// producer gives it and the header naming the letter.
func TestBrowserResendDeadLetter(t *testing.T) {
	t.Parallel()
	f := newRoleFixture(t)
	broker := kafkatest.NewCluster(t, 1)
	defer broker.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cfg := f.cfg
	cfg.Resender = pageResender{cl, f.store}
	srv := httptest.NewServer(analyst.Handler(cfg))
	defer srv.Close()
	letter := srv.URL + "/dlq/" + itoa(f.acmeDead)

	ctx, do := browser(t)
	signIn(t, ctx, "rita")
	do("rita opens the letter", chromedp.Navigate(letter), chromedp.WaitVisible(`#edits`))
	if n := value(t, ctx, "count rita's forms", chromedp.Evaluate[int](`document.querySelectorAll('#resend-form').length`)); n != 0 {
		t.Errorf("rita's letter page has %d resend forms", n)
	}

	octx, cancel := chromedp.NewContext(ctx)
	defer cancel()
	signIn(t, octx, "otto")
	if err := chromedp.Do(octx, chromedp.Navigate(letter), chromedp.WaitVisible(`#resend-form`),
		chromedp.SendKeys(`#resend-form textarea[name=set]`, "kind=usage"),
		chromedp.SendKeys(`#resend-form input[name=reason]`, "the producer left the kind out"),
		chromedp.Click(`#resend`), chromedp.WaitVisible(`#resent-notice`)); err != nil {
		t.Fatalf("browser: otto corrects the letter: %v", err)
	}
	by := value(t, octx, "read the correction", chromedp.Text(`#edit-list .edited-by`))
	row := value(t, octx, "read the correction's row", chromedp.Text(`#edit-list tbody tr`))
	if by != "otto" || !strings.Contains(row, "the producer left the kind out") || !strings.Contains(row, `kind: null → "usage"`) ||
		!strings.Contains(row, "usage/0@") {
		t.Errorf("the correction as listed: by %q, row %q", by, row)
	}

	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	fetch, err := kgo.NewClient(kgo.SeedBrokers(broker.ListenAddrs()...), kgo.ConsumeTopics("usage"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer fetch.Close()
	fs := fetch.PollFetches(pctx)
	var got []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	if len(got) != 1 || string(got[0].Value) != `{"tenant_id":"acme","record_id":"bad-acme","kind":"usage"}` || len(got[0].Headers) != 1 ||
		got[0].Headers[0].Key != inspect.ResendHeader || string(got[0].Headers[0].Value) != itoa(f.acmeDead) {
		t.Fatalf("the broker holds %d records: %+v", len(got), got)
	}
}
