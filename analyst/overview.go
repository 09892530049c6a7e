package analyst

import (
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/settlehq/settle/internal/money"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

// openAgeBounds are the overview's age buckets of open cases: under 1 h,
// 1-6 h, 6-24 h, 1-3 d, 3-7 d, a week and more.
var openAgeBounds = []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour, 3 * 24 * time.Hour, 7 * 24 * time.Hour}

// outcomeOrder is the order of outcomes in the chart, from the bottom of a
// bar: what went through first, what needs a look last.
var outcomeOrder = []string{string(message.OutcomeSettled), string(message.OutcomeDuplicate), string(message.OutcomeWaiting),
	string(message.OutcomeRefused), string(message.OutcomeQuarantined), string(message.OutcomeDeadLettered)}

// hourRow is one hour of the overview's chart.
type hourRow struct {
	Hour   time.Time
	Counts map[string]int64
	Total  int64
}

func (h *handler) overviewPage(w http.ResponseWriter, r *http.Request) {
	o, err := h.overview(r)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	now := time.Now()
	byHour := map[time.Time]*hourRow{}
	seen := map[string]bool{}
	for _, b := range o.Outcomes {
		row := byHour[b.Hour.UTC()]
		if row == nil {
			row = &hourRow{Hour: b.Hour.UTC(), Counts: map[string]int64{}}
			byHour[b.Hour.UTC()] = row
		}
		row.Counts[b.Outcome] += b.Count
		row.Total += b.Count
		seen[b.Outcome] = true
	}
	// Every hour of the window, the empty ones too: a gap in traffic is
	// something to see.
	first := now.UTC().Add(-overviewHours * time.Hour).Truncate(time.Hour)
	var hours []*hourRow
	for t := first; !t.After(now); t = t.Add(time.Hour) {
		row := byHour[t]
		if row == nil {
			row = &hourRow{Hour: t, Counts: map[string]int64{}}
		}
		hours = append(hours, row)
	}
	names := outcomeNames(seen)
	var open int64
	for _, c := range o.OpenByReason {
		open += c.Count
	}
	table := make([]*hourRow, 0, len(hours))
	for i := len(hours) - 1; i >= 0; i-- {
		if hours[i].Total > 0 {
			table = append(table, hours[i]) // newest first, as before
		}
	}
	h.render(w, r, "overview", map[string]any{"Title": "Overview", "Nav": "overview", "O": o, "Hours": table,
		"Outcomes": names, "Open": open, "Window": overviewHours, "First": lookFirst(o),
		"OutcomeChart": outcomeChart(hours, names), "AgeChart": ageChart(o.OpenByAge),
		"SettledTotals": settledTotals(o.Settled), "SettledHours": newestFirst(o.Settled),
		"OldestWaiting": strings.TrimSuffix(age(time.Duration(o.Attention.OldestWaitingSeconds)*time.Second), " ago")})
}

// currencyTotal is one currency's settled records and amounts over the
// overview's window.
type currencyTotal struct {
	Currency          string
	Settled           int64
	Charged, Credited string
}

// settledTotals adds up the hours of each currency, by currency.
func settledTotals(hours []inspect.SettledHour) []currencyTotal {
	type sums struct {
		n                 int64
		charged, credited money.Dec
	}
	by := map[string]*sums{}
	for _, hr := range hours {
		s := by[hr.Currency]
		if s == nil {
			s = &sums{}
			by[hr.Currency] = s
		}
		s.n += hr.Settled
		// PostgreSQL's numeric text, which always parses.
		if c, err := money.Parse(hr.Charged); err == nil {
			s.charged = s.charged.Add(c)
		}
		if c, err := money.Parse(hr.Credited); err == nil {
			s.credited = s.credited.Add(c)
		}
	}
	out := make([]currencyTotal, 0, len(by))
	for _, c := range slices.Sorted(maps.Keys(by)) {
		out = append(out, currencyTotal{Currency: c, Settled: by[c].n, Charged: by[c].charged.String(), Credited: by[c].credited.String()})
	}
	return out
}

// newestFirst is the settled hours, newest hour first (each hour's
// currencies in order), as the outcomes table reads.
func newestFirst(hours []inspect.SettledHour) []inspect.SettledHour {
	out := slices.Clone(hours)
	slices.SortStableFunc(out, func(a, b inspect.SettledHour) int { return b.Hour.Compare(a.Hour) })
	return out
}

// outcomeNames orders the outcomes seen: the known ones in outcomeOrder,
// any other after them by name.
func outcomeNames(seen map[string]bool) []string {
	var names, other []string
	for _, k := range outcomeOrder {
		if seen[k] {
			names = append(names, k)
		}
	}
	for k := range seen {
		if !containsString(outcomeOrder, k) {
			other = append(other, k)
		}
	}
	sort.Strings(other)
	return append(names, other...)
}

func containsString(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// Chart geometry, in SVG user units (the SVG scales to its box).
const (
	chartW, chartH     = 900, 200
	chartLeft, chartTB = 48, 24 // room for the y labels; top and bottom margins
)

// niceScale picks a chart's gridline step (1, 2 or 5 times a power of ten,
// about four lines up to peak) and its top (a whole number of steps).
func niceScale(peak int64) (top, step int64) {
	step = 1
	for _, p := range []int64{1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000} {
		for _, m := range []int64{1, 2, 5} {
			if m*p*4 >= peak {
				step = m * p
				top = (max(peak, 1) + step - 1) / step * step
				return top, step
			}
		}
	}
	return (peak + step - 1) / step * step, step
}

// outcomeChart is an inline SVG of stacked bars, one per hour, one colour
// per outcome (classes styled by style.css, so dark mode applies; no
// inline style, which the CSP forbids). Each bar's <title> is its numbers,
// which a browser shows on hover without script.
func outcomeChart(hours []*hourRow, names []string) template.HTML {
	var peak int64
	for _, r := range hours {
		peak = max(peak, r.Total)
	}
	top, step := niceScale(peak)
	plotW, plotH := float64(chartW-chartLeft-8), float64(chartH-2*chartTB)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="outcome-chart" class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="outcome-chart-title">`, chartW, chartH)
	fmt.Fprintf(&b, `<title id="outcome-chart-title">Deliveries per hour by outcome, last %d hours (UTC)</title>`, overviewHours)
	ticks := top / step
	for i := int64(0); i <= ticks; i++ {
		y := float64(chartTB) + plotH - plotH*float64(i)/float64(ticks)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, chartLeft, y, chartW-8, y)
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%.1f" text-anchor="end">%d</text>`, chartLeft-6, y+4, top*i/ticks)
	}
	n := max(len(hours), 1)
	slot := plotW / float64(n)
	barW := slot * 0.72
	for i, r := range hours {
		x := float64(chartLeft) + slot*float64(i) + (slot-barW)/2
		y := float64(chartTB) + plotH
		var tip []string
		for _, name := range names {
			c := r.Counts[name]
			if c == 0 {
				continue
			}
			tip = append(tip, fmt.Sprintf("%s %d", name, c))
		}
		fmt.Fprintf(&b, `<g class="bar" data-hour="%s" data-total="%d"><title>%s: %d deliveries%s</title>`,
			r.Hour.Format(time.RFC3339), r.Total, r.Hour.Format("2006-01-02 15:04Z"), r.Total, template.HTMLEscapeString(prefixed(": ", strings.Join(tip, ", "))))
		for _, name := range names {
			c := r.Counts[name]
			if c == 0 {
				continue
			}
			hgt := plotH * float64(c) / float64(top)
			y -= hgt
			fmt.Fprintf(&b, `<rect class="o-%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`,
				template.HTMLEscapeString(name), x, y, barW, hgt)
		}
		b.WriteString(`</g>`)
		if r.Hour.Hour()%3 == 0 {
			fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x+barW/2, chartH-6, r.Hour.Format("15h"))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

// ageLabel names an age bucket.
func ageLabel(a inspect.AgeBucket) string {
	d := func(x time.Duration) string {
		if x%(24*time.Hour) == 0 {
			return fmt.Sprintf("%d d", x/(24*time.Hour))
		}
		return fmt.Sprintf("%d h", x/time.Hour)
	}
	switch {
	case a.From == 0:
		return "< " + d(a.To)
	case a.To == 0:
		return "≥ " + d(a.From)
	}
	return d(a.From) + " – " + d(a.To)
}

// ageChart is an inline SVG of horizontal bars: open cases per age bucket,
// each a link to the queue of those cases.
func ageChart(ages []inspect.AgeBucket) template.HTML {
	const rowH, labelW, w = 26, 90, 900
	var peak int64
	for _, a := range ages {
		peak = max(peak, a.Count)
	}
	top, _ := niceScale(peak)
	h := rowH*len(ages) + 8
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="age-chart" class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="age-chart-title">`, w, h)
	b.WriteString(`<title id="age-chart-title">Open cases by age</title>`)
	for i, a := range ages {
		y := float64(i*rowH + 4)
		bw := float64(w-labelW-80) * float64(a.Count) / float64(top)
		q := "/cases?status=open"
		if a.From > 0 {
			q += "&amp;older_than=" + durationParam(a.From)
		}
		if a.To > 0 {
			q += "&amp;newer_than=" + durationParam(a.To)
		}
		// An <a> in SVG is a link like any other: no script needed.
		fmt.Fprintf(&b, `<a href="%s"><g class="age" data-count="%d"><title>%s: %d open</title>`, q, a.Count, template.HTMLEscapeString(ageLabel(a)), a.Count)
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%.1f" text-anchor="end">%s</text>`, labelW-8, y+rowH/2+2, template.HTMLEscapeString(ageLabel(a)))
		fmt.Fprintf(&b, `<rect class="age-bar b%d" x="%d" y="%.1f" width="%.1f" height="%d"/>`, i, labelW, y+3, max(bw, 1), rowH-8)
		fmt.Fprintf(&b, `<text class="value" x="%.1f" y="%.1f">%d</text>`, float64(labelW)+max(bw, 1)+6, y+rowH/2+2, a.Count)
		b.WriteString(`</g></a>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// durationParam writes an age as the queue's filters read it.
func durationParam(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return fmt.Sprintf("%dh", d/time.Hour)
}

// firstLook is one thing the overview says to look at, with where.
type firstLook struct{ What, URL string }

// lookFirst is what needs attention, most urgent first: dead letters (records
// that settled nothing), cases open for more than a day, records waiting
// for their target for more than an hour. Nothing when all is well.
func lookFirst(o *overview) []firstLook {
	var out []firstLook
	if n := o.Attention.DeadLettersSince; n > 0 {
		out = append(out, firstLook{fmt.Sprintf("%d dead letter%s in the last %d hours: read why, then correct the producer or replay", n,
			plural(n), overviewHours), "/dlq"})
	}
	var old int64
	for _, b := range o.OpenByAge {
		if b.From >= 24*time.Hour {
			old += b.Count
		}
	}
	if old > 0 {
		out = append(out, firstLook{fmt.Sprintf("%d case%s open for more than a day", old, plural(old)), "/cases?status=open&older_than=1d"})
	}
	if a := o.Attention; a.Waiting > 0 && a.OldestWaitingSeconds >= 3600 {
		out = append(out, firstLook{fmt.Sprintf("%d record%s waiting for their target, the oldest since %s", a.Waiting, plural(a.Waiting),
			age(time.Duration(a.OldestWaitingSeconds)*time.Second)), oldestWaitingURL(a)})
	}
	return out
}

// oldestWaitingURL is the explain page of the record waiting longest: what
// it waits for and why.
func oldestWaitingURL(a *inspect.Attention) string {
	if r := a.OldestWaiting; r != nil {
		return explainURL(r.TenantID, r.AccountPeriod, r.RecordID)
	}
	return ""
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
