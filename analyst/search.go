package analyst

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/settlehq/settle/settle/inspect"
)

func searchQuery(q url.Values) inspect.SearchQuery {
	return inspect.SearchQuery{Text: strings.TrimSpace(q.Get("q")), Tenant: strings.TrimSpace(q.Get("tenant")),
		Period: strings.TrimSpace(q.Get("period"))}
}

func (h *handler) apiSearch(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.ctx(r)
	defer cancel()
	hits, err := h.cfg.Store.Search(ctx, searchQuery(r.URL.Query()))
	if err != nil {
		h.fail(w, r, err, true)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"hits": hits})
}

// searchPage lists what the term names; a term that names one thing goes
// straight to its page.
func (h *handler) searchPage(w http.ResponseWriter, r *http.Request) {
	q := searchQuery(r.URL.Query())
	data := map[string]any{"Title": "Search", "Nav": "search", "Q": r.URL.Query(), "Term": q.Text}
	if q.Text == "" {
		h.render(w, r, "search", data)
		return
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	hits, err := h.cfg.Store.Search(ctx, q)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	if len(hits) == 1 && r.URL.Query().Get("list") == "" {
		http.Redirect(w, r, hitURL(hits[0]), http.StatusSeeOther)
		return
	}
	data["Hits"] = hits
	data["Capped"] = len(hits) >= inspect.SearchHitsMax
	h.render(w, r, "search", data)
}

// hitURL is the page of a search hit.
func hitURL(hit inspect.SearchHit) string {
	switch hit.Kind {
	case inspect.HitCase:
		return fmt.Sprintf("/cases/%d", hit.CaseID)
	case inspect.HitAccount:
		return accountURL(hit.TenantID, hit.Subject)
	}
	return explainURL(hit.TenantID, hit.AccountPeriod, hit.RecordID)
}

func explainURL(tenant, period, record string) string {
	return "/explain?" + url.Values{"tenant": {tenant}, "period": {period}, "record": {record}}.Encode()
}

func accountURL(tenant, subject string) string {
	return "/accounts/" + url.PathEscape(tenant) + "/" + url.PathEscape(subject)
}
