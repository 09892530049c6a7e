package analyst

import (
	"context"
	_ "embed"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/settlehq/settle/internal/money"
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
	OpenCaseAges(ctx context.Context, tenant string, now time.Time, bounds []time.Duration) ([]inspect.AgeBucket, error)
	DeadLetter(ctx context.Context, id int64) (*inspect.DeadLetter, error)
	DeadLetterBySource(ctx context.Context, tenant string, c message.Coordinates) (int64, error)
	SettledByHour(ctx context.Context, tenant string, since time.Time) ([]inspect.SettledHour, error)
	SubjectAttention(ctx context.Context, tenant, subject string) (*inspect.SubjectAttention, error)
	DeadLetterEdits(ctx context.Context, tenant string, id int64) ([]inspect.DeadLetterEdit, error)
	LastReplays(ctx context.Context, ds []inspect.DeadLetter) ([]*message.Coordinates, error)
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

// routeMux is a ServeMux that remembers its patterns and the role each
// needs, so the OpenAPI and role tests can tell a route the document
// misses or a role it misstates.
type routeMux struct {
	*http.ServeMux
	patterns []string
	roles    map[string]Role                                 // pattern → the role it needs
	refuse   func(http.ResponseWriter, *http.Request, error) // answers a bad parameter or a role too low
}

func newRouteMux(refuse func(http.ResponseWriter, *http.Request, error)) *routeMux {
	return &routeMux{ServeMux: http.NewServeMux(), roles: map[string]Role{}, refuse: refuse}
}

// Handle registers a handler that needs role, behind the role and
// parameter checks, and remembers its pattern and role.
func (m *routeMux) Handle(role Role, pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.roles[pattern] = role
	m.ServeMux.Handle(pattern, requireRole(role, checkParams(pattern, h, m.refuse), m.refuse))
}

// HandleFunc registers a handler function that needs role.
func (m *routeMux) HandleFunc(role Role, pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.Handle(role, pattern, http.HandlerFunc(f))
}

// routes registers every page and API route with the role it needs: the
// one list the OpenAPI route test and the role test check against the
// description. Every read keeps to the token's tenant (tenantScoped).
func (h *handler) routes(mux *routeMux) {
	const read, resolve, operate = RoleRead, RoleResolve, RoleOperate
	mux.Handle(read, "GET /static/", http.StripPrefix("/static/", http.FileServerFS(staticFiles)))
	mux.HandleFunc(read, "GET /{$}", h.overviewPage)
	mux.HandleFunc(read, "GET /cases", h.queuePage)
	mux.HandleFunc(read, "GET /cases/{id}", h.casePage)
	mux.HandleFunc(resolve, "POST /cases/{id}/resolve", h.resolveForm)
	mux.HandleFunc(read, "GET /explain", h.explainPage)
	mux.HandleFunc(read, "GET /dlq", h.dlqPage)
	mux.HandleFunc(read, "GET /statement", h.statementPage)

	mux.HandleFunc(read, "GET /api/overview", h.apiOverview)
	mux.HandleFunc(read, "GET /api/cases", apiGet(h, apiCasesFilter, h.cfg.Store.ListCases))
	mux.HandleFunc(read, "GET /api/cases/counts", h.apiCaseCounts)
	mux.HandleFunc(read, "GET /api/cases/{id}", apiGet(h, caseID, h.cfg.Store.Case))
	mux.HandleFunc(resolve, "POST /api/cases/{id}/resolve", h.apiResolve)
	mux.HandleFunc(read, "GET /api/explain/{tenant}/{period}/{record}", h.apiExplain)
	mux.HandleFunc(read, "GET /api/dlq", apiGet(h, dlqFilterOf, h.cfg.Store.DeadLetters))
	mux.HandleFunc(read, "GET /api/statement/{tenant}/{period}", h.apiStatement)

	mux.HandleFunc(read, "GET /search", h.searchPage)
	mux.HandleFunc(read, "GET /accounts/{tenant}/{subject}", h.accountPage)
	mux.HandleFunc(read, "GET /dlq/{id}", h.deadLetterPage)
	mux.HandleFunc(operate, "GET /dlq/replay", h.replayPreview) // the replay's first step
	mux.HandleFunc(operate, "POST /dlq/replay", h.replayForm)
	mux.HandleFunc(read, "GET /dlq/replayed", h.replayedPage) // where the form redirects (303)
	mux.HandleFunc(operate, "POST /dlq/{id}/resend", h.resendForm)
	mux.HandleFunc(read, "GET /cases.csv", h.casesCSV)

	mux.HandleFunc(read, "GET /api/search", h.apiSearch)
	mux.HandleFunc(read, "GET /api/accounts/{tenant}/{subject}", h.apiAccount)
	mux.HandleFunc(read, "GET /api/cases/{id}/links", apiGet(h, caseID, h.cfg.Store.CaseLinks))
	mux.HandleFunc(read, "GET /api/dlq/{id}", apiGet(h, deadLetterID, h.cfg.Store.DeadLetter))
	mux.HandleFunc(operate, "POST /api/dlq/replay", h.apiReplay)
	mux.HandleFunc(operate, "POST /api/dlq/{id}/resend", h.apiResend)
	mux.HandleFunc(read, "GET /api/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(openAPI)
	})
}

// minus is a - b, exact decimals as text, signed ("+15", "-3"); "" when
// either is not a number (a case without an amount on one side).
func minus(a, b string) string {
	x, errA := money.Parse(a)
	y, errB := money.Parse(b)
	if errA != nil || errB != nil {
		return ""
	}
	d := x.Sub(y)
	if d.Sign() > 0 {
		return "+" + d.String()
	}
	return d.String()
}

// pageFuncs are the templates' links between pages.
var pageFuncs = template.FuncMap{
	"explainURL": explainURL,
	"written":    written,
	"minus":      minus,
	// since is how long ago at was, without the "ago": a case's age.
	"since":      func(at time.Time) string { return strings.TrimSuffix(age(time.Since(at)), " ago") },
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
