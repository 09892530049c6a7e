package analyst

import (
	"context"
	_ "embed"
	"html/template"
	"net/http"
	"time"

	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

// PageStore is what the page's search, account, dead-letter and export
// views need of the settlement store, beside Store's queue and case reads.
type PageStore interface {
	Search(ctx context.Context, q inspect.SearchQuery) ([]inspect.SearchHit, error)
	Balances(ctx context.Context, tenant, subject string, rowsMax int) ([]inspect.AccountView, error)
	AccountSettlements(ctx context.Context, tenant, subject, currency string, limit int) ([]inspect.AccountSettlement, error)
	CaseLinks(ctx context.Context, id int64) (*inspect.CaseLinks, error)
	CaseResolutions(ctx context.Context, ids []int64) (map[int64]inspect.CaseResolution, error)
	OpenCaseAges(ctx context.Context, now time.Time, bounds []time.Duration) ([]inspect.AgeBucket, error)
	DeadLetter(ctx context.Context, id int64) (*inspect.DeadLetter, error)
}

// Replayer produces dead letters' original key, value and headers back to
// their source topic, where they go through the pipeline again (their
// identities keep a second replay from settling twice). It returns where
// each landed, in order; on an error, the coordinates of the ones before
// the first that failed. Declared here, implemented by package service
// with its Kafka producer: this package never talks to Kafka.
type Replayer interface {
	Replay(ctx context.Context, ds []inspect.DeadLetter) ([]message.Coordinates, error)
}

// openAPI is the description of the admin API and the HTTP edge, served at
// /api/openapi.json; openapi_test.go checks every route's real answers
// against it.
//
//go:embed openapi.json
var openAPI []byte

// routeMux is a ServeMux that remembers its patterns, so the OpenAPI test
// can tell a route the document misses.
type routeMux struct {
	*http.ServeMux
	patterns []string
	refuse   func(http.ResponseWriter, *http.Request, error) // answers a bad parameter
}

func newRouteMux(refuse func(http.ResponseWriter, *http.Request, error)) *routeMux {
	return &routeMux{ServeMux: http.NewServeMux(), refuse: refuse}
}

// Handle registers a handler, behind the parameter check, and remembers
// its pattern.
func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, checkParams(pattern, h, m.refuse))
}

// HandleFunc registers a handler function and remembers its pattern.
func (m *routeMux) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(f))
}

// routes registers every page and API route: the one list the OpenAPI
// route test checks against the description.
func (h *handler) routes(mux *routeMux) {
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(staticFiles)))
	mux.HandleFunc("GET /{$}", h.overviewPage)
	mux.HandleFunc("GET /cases", h.queuePage)
	mux.HandleFunc("GET /cases/{id}", h.casePage)
	mux.HandleFunc("POST /cases/{id}/resolve", h.resolveForm)
	mux.HandleFunc("GET /explain", h.explainPage)
	mux.HandleFunc("GET /dlq", h.dlqPage)
	mux.HandleFunc("GET /statement", h.statementPage)

	mux.HandleFunc("GET /api/overview", h.apiOverview)
	mux.HandleFunc("GET /api/cases", apiGet(h, apiCasesFilter, h.cfg.Store.ListCases))
	mux.HandleFunc("GET /api/cases/counts", h.apiCaseCounts)
	mux.HandleFunc("GET /api/cases/{id}", apiGet(h, caseID, h.cfg.Store.Case))
	mux.HandleFunc("POST /api/cases/{id}/resolve", h.apiResolve)
	mux.HandleFunc("GET /api/explain/{tenant}/{period}/{record}", h.apiExplain)
	mux.HandleFunc("GET /api/dlq", apiGet(h, dlqFilterOf, h.cfg.Store.DeadLetters))
	mux.HandleFunc("GET /api/statement/{tenant}/{period}", h.apiStatement)

	mux.HandleFunc("GET /search", h.searchPage)
	mux.HandleFunc("GET /accounts/{tenant}/{subject}", h.accountPage)
	mux.HandleFunc("GET /dlq/{id}", h.deadLetterPage)
	mux.HandleFunc("GET /dlq/replay", h.replayPreview)
	mux.HandleFunc("POST /dlq/replay", h.replayForm)
	mux.HandleFunc("GET /cases.csv", h.casesCSV)

	mux.HandleFunc("GET /api/search", h.apiSearch)
	mux.HandleFunc("GET /api/accounts/{tenant}/{subject}", h.apiAccount)
	mux.HandleFunc("GET /api/cases/{id}/links", apiGet(h, caseID, h.cfg.Store.CaseLinks))
	mux.HandleFunc("GET /api/dlq/{id}", apiGet(h, deadLetterID, h.cfg.Store.DeadLetter))
	mux.HandleFunc("POST /api/dlq/replay", h.apiReplay)
	mux.HandleFunc("GET /api/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(openAPI)
	})
}

// pageFuncs are the templates' links between pages.
var pageFuncs = template.FuncMap{
	"explainURL": explainURL,
	"accountURL": accountURL,
	// short cuts a settlement id (32 hex digits) to its first 12 for a
	// table cell; the link and the title carry all of it.
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12] + "…"
		}
		return s
	},
}
