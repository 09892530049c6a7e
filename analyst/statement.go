package analyst

import (
	"context"
	"errors"
	"net/http"

	"github.com/settlehq/settle/settle/inspect"
)

// StatementStore is what the statement page needs of the store, beside
// Store: a store without it serves no statements.
type StatementStore interface {
	Statement(ctx context.Context, in inspect.StatementInput) (*inspect.Statement, error)
}

var errNoStatements = errors.New("this store serves no statements")

func (h *handler) statement(r *http.Request, tenant, period string) (*inspect.Statement, error) {
	ss, ok := h.cfg.Store.(StatementStore)
	if !ok {
		return nil, errNoStatements
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	return ss.Statement(ctx, inspect.StatementInput{TenantID: tenant, Period: period, Subject: r.URL.Query().Get("subject"),
		Rows: r.URL.Query().Get("rows") == "1"})
}

// apiStatement serves GET /api/statement/{tenant}/{period}[?subject=&rows=1].
func (h *handler) apiStatement(w http.ResponseWriter, r *http.Request) {
	st, err := h.statement(r, r.PathValue("tenant"), r.PathValue("period"))
	if err != nil {
		h.fail(w, r, err, true)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// statementPage serves GET /statement?tenant=&period=[&subject=&rows=1].
func (h *handler) statementPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data := map[string]any{"Title": "Statement", "Nav": "statement", "Q": q}
	if tenant, period := q.Get("tenant"), q.Get("period"); tenant != "" && period != "" {
		st, err := h.statement(r, tenant, period)
		if err != nil {
			h.fail(w, r, err, false)
			return
		}
		data["S"] = st
	}
	h.render(w, r, "statement", data)
}
