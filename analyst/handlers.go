package analyst

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
)

// Reasons and statuses offered by the queue's filter.
var (
	caseReasons  = inspect.CaseReasons
	caseStatuses = []string{inspect.CaseOpen, inspect.CaseAccepted, inspect.CaseRejected, inspect.CaseAutoResolved}
)

// overviewHours is how far back the overview's outcome chart looks.
const overviewHours = 24

// overview is what the overview shows.
type overview struct {
	Attention    *inspect.Attention      `json:"attention"` // dead letters of the last 24 hours, waiting records
	OpenByReason []inspect.CaseCount     `json:"open_by_reason"`
	OpenByAge    []inspect.AgeBucket     `json:"open_by_age"`
	Outcomes     []inspect.OutcomeBucket `json:"outcomes"`
	Settled      []inspect.SettledHour   `json:"settled"` // per hour and currency, oldest first
}

func (h *handler) overview(r *http.Request) (*overview, error) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	counts, err := h.cfg.Store.CountCases(ctx, "", "")
	if err != nil {
		return nil, err
	}
	o := &overview{OpenByReason: []inspect.CaseCount{}}
	for _, c := range counts {
		if c.Status == inspect.CaseOpen {
			o.OpenByReason = append(o.OpenByReason, c)
		}
	}
	since := time.Now().Add(-overviewHours * time.Hour).Truncate(time.Hour)
	if o.Outcomes, err = h.cfg.Store.OutcomeTimeline(ctx, "", since); err != nil {
		return nil, err
	}
	if o.Settled, err = h.cfg.Store.SettledByHour(ctx, "", since); err != nil {
		return nil, err
	}
	if o.OpenByAge, err = h.cfg.Store.OpenCaseAges(ctx, "", time.Now(), openAgeBounds); err != nil {
		return nil, err
	}
	if o.Attention, err = h.cfg.Store.Attention(ctx, "", time.Now().Add(-overviewHours*time.Hour)); err != nil {
		return nil, err
	}
	return o, nil
}

func (h *handler) apiOverview(w http.ResponseWriter, r *http.Request) {
	o, err := h.overview(r)
	if err != nil {
		h.fail(w, r, err, true)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

// apiCasesFilter is the queue's filter of /api/cases: open cases unless a
// status is asked for, as the queue page and the CLI.
func apiCasesFilter(r *http.Request) (inspect.CaseFilter, error) {
	q := r.URL.Query()
	if !q.Has("status") {
		q.Set("status", inspect.CaseOpen) // what is left to do
	}
	return filterFrom(q, time.Now())
}

func (h *handler) apiCaseCounts(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	counts, err := h.cfg.Store.CountCases(ctx, r.URL.Query().Get("tenant"), r.URL.Query().Get("period"))
	if err != nil {
		h.fail(w, r, err, true)
		return
	}
	writeJSON(w, http.StatusOK, counts)
}

func (h *handler) queuePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("status") {
		q.Set("status", inspect.CaseOpen) // the queue is what is left to do
	}
	f, ferr := filterFrom(q, time.Now())
	ctx, cancel := h.ctx(r)
	defer cancel()
	data := map[string]any{"Title": "Conflict queue", "Nav": "cases", "Q": q, "Reasons": caseReasons,
		"Statuses": caseStatuses}
	if ferr != nil {
		w.WriteHeader(http.StatusBadRequest)
		data["Error"] = ferr.Error()
		h.render(w, r, "queue", data)
		return
	}
	page, err := h.cfg.Store.ListCases(ctx, f)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	counts, err := h.cfg.Store.CountCases(ctx, f.Tenant, f.Period)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	// Facets: reason rows by status columns, each cell a link to that slice.
	type facet struct {
		Reason string
		Counts map[string]int64
		Total  int64
	}
	var facets []*facet
	byReason := map[string]*facet{}
	for _, c := range counts {
		fc := byReason[c.Reason]
		if fc == nil {
			fc = &facet{Reason: c.Reason, Counts: map[string]int64{}}
			byReason[c.Reason] = fc
			facets = append(facets, fc)
		}
		fc.Counts[c.Status] += c.Count
		fc.Total += c.Count
	}
	data["Page"] = page
	data["Facets"] = facets
	data["Filter"] = f
	if page.Next != "" {
		next := cloneValues(q)
		next.Set("after", page.Next)
		data["NextURL"] = "/cases?" + next.Encode()
	}
	if f.After != "" {
		first := cloneValues(q)
		first.Del("after")
		data["FirstURL"] = "/cases?" + first.Encode()
	}
	base := cloneValues(q)
	base.Del("after")
	base.Del("reason")
	base.Del("status")
	// A query already encoded: as a plain string, html/template would
	// escape its = and & into one parameter.
	data["FacetBase"] = template.URL(base.Encode())
	h.render(w, r, "queue", data)
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		if len(vs) > 0 && vs[0] != "" {
			out[k] = append([]string(nil), vs...)
		}
	}
	return out
}

func (h *handler) casePage(w http.ResponseWriter, r *http.Request) {
	h.showCase(w, r, http.StatusOK, "", nil)
}

// showCase renders a case page, with the error of a failed resolve attempt
// and the values the analyst typed.
func (h *handler) showCase(w http.ResponseWriter, r *http.Request, code int, formErr string, form url.Values) {
	_, cl, ok := load(h, w, r, false, caseID, h.caseAndLinks)
	if !ok {
		return
	}
	c, links := cl.c, cl.links
	if form == nil {
		form = url.Values{}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	h.render(w, r, "case", map[string]any{"Title": fmt.Sprintf("Case %d", c.ID), "Nav": "cases", "C": c, "Links": links,
		"FormError": formErr, "Form": form, "Resolved": r.URL.Query().Get("resolved") != "", "Analyst": analystOf(r), "Can": canOf(r)})
}

// caseWithLinks is what a case page shows.
type caseWithLinks struct {
	c     *inspect.Case
	links *inspect.CaseLinks
}

func (h *handler) caseAndLinks(ctx context.Context, id int64) (caseWithLinks, error) {
	c, err := h.cfg.Store.Case(ctx, id)
	if err != nil {
		return caseWithLinks{}, err
	}
	links, err := h.cfg.Store.CaseLinks(ctx, id)
	return caseWithLinks{c, links}, err
}

// errBadRequest labels a request that cannot be carried out as sent and
// says what to send instead (400); filters have inspect.ErrBadFilter.
var errBadRequest = errors.New("bad request")

// resolveInput is the body of POST /api/cases/{id}/resolve.
type resolveInput struct {
	Decision string `json:"decision"` // accept or reject
	Amount   string `json:"amount,omitempty"`
	Reason   string `json:"reason"`
	By       string `json:"by"` // ignored when a token names the analyst
}

// resolveFieldMax caps the reason and name of a resolution.
const resolveFieldMax = 2000

func (in resolveInput) request(id int64) (settle.ResolveRequest, error) {
	in.Reason, in.By, in.Amount = strings.TrimSpace(in.Reason), strings.TrimSpace(in.By), strings.TrimSpace(in.Amount)
	switch {
	case in.Decision != "accept" && in.Decision != "reject":
		return settle.ResolveRequest{}, fmt.Errorf("%w: decision %q: want accept or reject", errBadRequest, in.Decision)
	case in.Reason == "":
		return settle.ResolveRequest{}, fmt.Errorf("%w: a reason is required", errBadRequest)
	case in.By == "":
		return settle.ResolveRequest{}, fmt.Errorf("%w: a name (by) is required", errBadRequest)
	case len(in.Reason) > resolveFieldMax || len(in.By) > resolveFieldMax || len(in.Amount) > 64:
		return settle.ResolveRequest{}, fmt.Errorf("%w: reason, name or amount too long", errBadRequest)
	case in.Decision == "reject" && in.Amount != "":
		return settle.ResolveRequest{}, fmt.Errorf("%w: an amount goes with accept only", errBadRequest)
	}
	for _, f := range []struct{ name, v string }{{"reason", in.Reason}, {"by", in.By}, {"amount", in.Amount}} {
		if why := badText(f.v); why != "" {
			return settle.ResolveRequest{}, fmt.Errorf("%w: %s %s; send UTF-8 text without NUL bytes", errBadRequest, f.name, why)
		}
	}
	return settle.ResolveRequest{CaseID: id, Decision: in.Decision, Amount: in.Amount, Reason: in.Reason, By: in.By}, nil
}

func (h *handler) apiResolve(w http.ResponseWriter, r *http.Request) {
	id, err := caseID(r)
	if err != nil {
		h.fail(w, r, err, true)
		return
	}
	var in resolveInput
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		h.fail(w, r, fmt.Errorf("%w: body: %w (send {\"decision\": \"accept\" or \"reject\", \"reason\": ..., \"by\": ...})", errBadRequest, err), true)
		return
	}
	if name := analystOf(r); name != "" {
		in.By = name // the token says who; a stated name does not
	}
	req, err := in.request(id)
	if err != nil {
		h.fail(w, r, err, true)
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	res, err := h.cfg.Store.Resolve(ctx, req)
	if err != nil {
		h.fail(w, r, err, true)
		return
	}
	if msg := resolvedOtherwise(res, req); msg != "" {
		writeJSON(w, http.StatusConflict, map[string]any{"error": msg, "resolution": res})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// resolvedOtherwise says why req changed nothing when its case was
// resolved before with another decision, or "" when req was carried out or
// repeats the stored decision (a double submit, which gets the stored
// resolution): a case is resolved once.
func resolvedOtherwise(res *settle.Resolution, req settle.ResolveRequest) string {
	if !res.Replayed || res.Decision == req.Decision {
		return ""
	}
	return fmt.Sprintf("case %d was already resolved (%s, status %s); a case is resolved once, so %s changed nothing",
		res.CaseID, res.Decision, res.Status, req.Decision)
}

func (h *handler) resolveForm(w http.ResponseWriter, r *http.Request) {
	id, err := caseID(r)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.showCase(w, r, http.StatusBadRequest, err.Error(), nil)
		return
	}
	in := resolveInput{Decision: r.PostForm.Get("decision"), Amount: r.PostForm.Get("amount"),
		Reason: r.PostForm.Get("reason"), By: r.PostForm.Get("by")}
	if name := analystOf(r); name != "" {
		in.By = name // the token says who; a stated name does not
	}
	req, err := in.request(id)
	var res *settle.Resolution
	if err == nil {
		ctx, cancel := h.ctx(r)
		res, err = h.cfg.Store.Resolve(ctx, req)
		cancel()
	}
	if err != nil {
		code := status(err)
		if code == http.StatusInternalServerError {
			h.log.Error("resolve case", "case", id, "err", err)
		}
		h.showCase(w, r, code, publicError(err), r.PostForm)
		return
	}
	if msg := resolvedOtherwise(res, req); msg != "" {
		h.showCase(w, r, http.StatusConflict, msg, r.PostForm)
		return
	}
	// Post/redirect/get: a reload does not submit again (and would only
	// get the stored resolution if it did).
	http.Redirect(w, r, fmt.Sprintf("/cases/%d?resolved=1", id), http.StatusSeeOther)
}

func (h *handler) apiExplain(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	e, err := h.cfg.Store.Explain(ctx, r.PathValue("tenant"), r.PathValue("period"), r.PathValue("record"))
	if err != nil {
		h.fail(w, r, err, true)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

func (h *handler) explainPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data := map[string]any{"Title": "Explain", "Nav": "explain", "Q": q}
	tenant, period, record := q.Get("tenant"), q.Get("period"), q.Get("record")
	if tenant != "" && period != "" && record != "" {
		ctx, cancel := h.ctx(r)
		defer cancel()
		e, err := h.cfg.Store.Explain(ctx, tenant, period, record)
		if err != nil {
			h.fail(w, r, err, false)
			return
		}
		data["E"] = e
	}
	h.render(w, r, "explain", data)
}

// apiGet serves a JSON read: what to read parsed from the request by
// parse (a 400 that says what to send), read by read (a 404 for none, a
// 504 for a database too slow), answered 200 with the value.
func apiGet[K, T any](h *handler, parse func(*http.Request) (K, error), read func(context.Context, K) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, v, ok := load(h, w, r, true, parse, read); ok {
			writeJSON(w, http.StatusOK, v)
		}
	}
}

// load is the start of a read, for a page or (asJSON) the API: what to
// read parsed from the request by parse, then read by read within the
// request's timeout. On a failure of either it has answered with the error
// (h.fail: 400, 404, 504, ...) and ok is false.
func load[K, T any](h *handler, w http.ResponseWriter, r *http.Request, asJSON bool,
	parse func(*http.Request) (K, error), read func(context.Context, K) (T, error)) (k K, v T, ok bool) {
	k, err := parse(r)
	if err != nil {
		h.fail(w, r, err, asJSON)
		return k, v, false
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	if v, err = read(ctx, k); err != nil {
		h.fail(w, r, err, asJSON)
		return k, v, false
	}
	return k, v, true
}
