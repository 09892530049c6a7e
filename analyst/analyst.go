// Package analyst serves the analysts' surface over HTTP: a JSON API
// described by an embedded OpenAPI document, and server-rendered HTML pages
// (the conflict queue and its CSV export, a case with its payloads side by
// side and the resolve actions, the explain view of one record, search,
// accounts, dead letters and their replay, an overview with charts).
// Templates and CSS are embedded; there is no script and no build step.
//
// It owns presentation only: every read and every resolution goes through
// package settle, which owns the SQL and the transaction. It never settles
// anything itself, and it never talks to Kafka: a replay goes through the
// Replayer its caller passes.
package analyst

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/retention"
)

// Store is what the analyst surface needs of the settlement store.
type Store interface {
	ListCases(ctx context.Context, f inspect.CaseFilter) (*inspect.CasePage, error)
	CountCasesUpTo(ctx context.Context, f inspect.CaseFilter, rowsMax int) (int64, error)
	CountCases(ctx context.Context, tenant, period string) ([]inspect.CaseCount, error)
	Case(ctx context.Context, id int64) (*inspect.Case, error)
	Resolve(ctx context.Context, req settle.ResolveRequest) (*settle.Resolution, error)
	Explain(ctx context.Context, tenant, period, recordID string) (*inspect.Explanation, error)
	OutcomeTimeline(ctx context.Context, tenant string, since time.Time) ([]inspect.OutcomeBucket, error)
	Attention(ctx context.Context, tenant string, since time.Time) (*inspect.Attention, error)
	DeadLetters(ctx context.Context, f inspect.DeadLetterFilter) ([]inspect.DeadLetter, error)
	PageStore // search, accounts, dead letters, exports (pagestore.go)
}

// StoreOf is the Store of one settle database: its read side (inspect)
// and its resolutions (settle).
func StoreOf(s *settle.Store) Store {
	return settleStore{inspect.New(s), s}
}

// StoreOn is StoreOf with its reads over readPool, a pool of its own on
// the same database; resolutions still go through s.
func StoreOn(s *settle.Store, readPool *pgxpool.Pool) Store {
	return settleStore{inspect.NewOn(s, readPool), s}
}

type (
	readSide    = inspect.Store
	writeSide   = settle.Store
	settleStore struct {
		*readSide
		*writeSide
	}
)

// Config configures the handler. The zero value of every field but Store
// is a documented default.
type Config struct {
	Store Store

	// Tokens maps each bearer token to the analyst it names: a name, a
	// role and a tenant scope. When set, every request must send one as
	// "Authorization: Bearer <token>"; each route needs a role (its
	// registration in routes.go says which, the OpenAPI document too),
	// every read keeps to the token's tenant, and a resolution records
	// the token's analyst, not a name the request states. Empty = no
	// authentication (keep the listener on loopback): whoever reaches it
	// operates on every tenant, and a resolution records the name the
	// form or body gives.
	Tokens map[string]Analyst

	// Hosts are the Host header values the surface answers: "host:port",
	// or a bare "host" for any port; names compare case-insensitively.
	// Any other Host (a page of a foreign name rebound to this address)
	// gets 421 Misdirected Request. Empty = the loopback names localhost,
	// 127.0.0.1 and [::1] on any port.
	Hosts []string

	// Logger gets failures of requests. nil = slog.Default().
	Logger *slog.Logger

	// RequestTimeout bounds one request's database work; an export's,
	// each of its reads. 0 = 10 s.
	RequestTimeout time.Duration

	// ReadsMax is the most reads of the page and the API that run at once
	// (each holds one database connection at most); more are answered
	// 503 with Retry-After. An export holds its slot while it streams.
	// 0 = ReadsMaxDefault.
	ReadsMax int

	// ExportRowsMax is the most cases one CSV export holds; one that would
	// hold more is refused before its first byte. 0 = CaseExportRowsMax.
	ExportRowsMax int

	// Replayer produces dead letters back to their source topic for the
	// dead-letter page's replay. nil = the page shows what a replay would
	// do and points to `settle dlq replay`.
	Replayer Replayer

	// Resender corrects and resends a dead letter for the letter page's
	// form and POST /api/dlq/{id}/resend. nil = they answer 503 and point
	// to `settle dlq resend`.
	Resender Resender

	// TimeZone is the zone pages show beside UTC when a time is hovered.
	// nil = UTC only (with the age, "3 h ago").
	TimeZone *time.Location
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Store == nil {
		return errors.New("analyst: Store is required")
	}
	if c.RequestTimeout < 0 || c.ExportRowsMax < 0 || c.ReadsMax < 0 {
		return errors.New("analyst: RequestTimeout, ReadsMax and ExportRowsMax must not be negative")
	}
	for tok, a := range c.Tokens {
		if tok == "" || a.Name == "" {
			return errors.New("analyst: Tokens: an empty token or analyst name")
		}
		if len(a.Name) > resolveFieldMax {
			return fmt.Errorf("analyst: Tokens: analyst name of %d bytes, at most %d", len(a.Name), resolveFieldMax)
		}
		if _, ok := roleNames[a.Role.orDefault()]; !ok {
			return fmt.Errorf("analyst: Tokens: %s: %v is not a role", a.Name, a.Role)
		}
	}
	for _, h := range c.Hosts {
		if _, _, err := splitHost(h); err != nil {
			return fmt.Errorf("analyst: Hosts: %w", err)
		}
	}
	return nil
}

//go:embed templates/*.html static/*
var assets embed.FS

// staticFiles is what /static/ serves: static/ alone, so that no path
// under it (/static/%2e%2e/templates/...) reaches the templates.
var staticFiles = must(fs.Sub(assets, "static"))

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"tsp": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"pretty": func(b []byte) string {
		if out, ok := indentJSON(b); ok {
			return out
		}
		return string(b)
	},
	"q": url.QueryEscape,
	"pct": func(n, max int64) int64 {
		if max <= 0 {
			return 0
		}
		return n * 100 / max
	},
}).Funcs(pageFuncs).ParseFS(assets, "templates/*.html"))

type handler struct {
	pages  *template.Template // pages with this handler's time zone
	cfg    Config
	log    *slog.Logger
	tokens []namedToken // Config.Tokens, hashed
	hosts  map[string]bool
	reads  chan struct{} // a slot per running read: limitReads
}

// namedToken is a bearer token by its SHA-256: every comparison is of 32
// bytes, so its timing says nothing of a token's length either.
type namedToken struct {
	sum     [sha256.Size]byte
	analyst Analyst
}

// Handler returns the analyst surface: pages under /, the JSON API under
// /api/. Mount it at the root of the admin listener; more specific paths
// (/livez, /readyz, /metrics) registered beside it take precedence.
func Handler(cfg Config) http.Handler {
	if err := cfg.Validate(); err != nil {
		panic(err) // a wiring defect: package service always passes a store
	}
	h, _ := newHandler(cfg)
	return h
}

// newHandler builds the surface and the mux it routes with (whose patterns
// the OpenAPI test reads).
func newHandler(cfg Config) (http.Handler, *routeMux) {
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.ExportRowsMax == 0 {
		cfg.ExportRowsMax = CaseExportRowsMax
	}
	if cfg.ReadsMax == 0 {
		cfg.ReadsMax = ReadsMaxDefault
	}
	h := &handler{cfg: cfg, log: cfg.Logger, hosts: map[string]bool{}, reads: make(chan struct{}, cfg.ReadsMax)}
	if h.log == nil {
		h.log = slog.Default()
	}
	for tok, a := range cfg.Tokens {
		a.Role = a.Role.orDefault()
		h.tokens = append(h.tokens, namedToken{sha256.Sum256([]byte(tok)), a})
	}
	// Every read and resolution keeps to the request's analyst's tenant.
	h.cfg.Store = tenantScoped{cfg.Store}
	hosts := cfg.Hosts
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "[::1]"}
	}
	for _, e := range hosts {
		name, port, _ := splitHost(e)
		h.hosts[name+":"+port] = true
	}
	h.pages = h.withTimes(pages)
	mux := newRouteMux(func(w http.ResponseWriter, r *http.Request, err error) {
		h.fail(w, r, err, strings.HasPrefix(r.URL.Path, "/api/"))
	})
	h.routes(mux)

	// Cross-origin POSTs from a browser (forms on other sites) are refused:
	// Sec-Fetch-Site or Origin must name this origin. Clients that send
	// neither (curl, the CLI) are not browsers and are let through.
	csrf := http.NewCrossOriginProtection()
	return h.checkHost(h.auth(csrf.Handler(securityHeaders(h.limitReads(mux))))), mux
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'none'; form-action 'self'; frame-ancestors 'none'")
		w.Header().Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// checkHost answers only requests whose Host is one of Config.Hosts. A
// browser on a page of a foreign name that resolves to this address (DNS
// rebinding) sends that name as Host and counts itself same-origin, so
// the cross-origin check alone cannot refuse it; the Host it cannot fake.
func (h *handler) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, port, err := splitHost(r.Host)
		if port == "" {
			port = "80" // the listener speaks plain HTTP
		}
		if err != nil || !(h.hosts[name+":"+port] || h.hosts[name+":"]) {
			http.Error(w, fmt.Sprintf("misdirected request: Host %q is not a name of this listener; "+
				"use its address, or add the name to --admin-allowed-hosts", r.Host), http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// splitHost reads a Host header value, or a Config.Hosts entry, as a
// lower-case name (IPv6 without brackets) and a port ("" when absent).
func splitHost(hostport string) (name, port string, err error) {
	name = hostport
	switch {
	case strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]"): // [v6]
		name = hostport[1 : len(hostport)-1]
	case strings.HasPrefix(hostport, "["), strings.Count(hostport, ":") == 1: // [v6]:port, name:port
		if name, port, err = net.SplitHostPort(hostport); err != nil {
			return "", "", fmt.Errorf("host %q: %w", hostport, err)
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return "", "", fmt.Errorf("host %q: port %q is not a port", hostport, port)
		}
	}
	if name == "" || strings.ContainsAny(name, "/?#@%[] \t") {
		return "", "", fmt.Errorf("host %q: want a name or an address, with or without :port", hostport)
	}
	return strings.ToLower(name), port, nil
}

// auth requires one of the bearer tokens when any is configured, and puts
// the analyst it names in the request's context (without tokens, the
// context names none: analystIn says anyone).
func (h *handler) auth(next http.Handler) http.Handler {
	if len(h.tokens) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(tok))
		var who Analyst
		// Every token is compared, in constant time, so timing tells
		// nothing about which one nearly matched.
		for _, t := range h.tokens {
			if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
				who = t.analyst
			}
		}
		if !strings.EqualFold(scheme, "Bearer") || tok == "" || who.Name == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="settle"`)
			http.Error(w, "unauthorized: send Authorization: Bearer <your analyst token>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), analystKey{}, who)))
	})
}

func (h *handler) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.cfg.RequestTimeout)
}

// filterFrom reads the queue's filters from a query string. Ages are Go
// durations ("2h", "30m") or days ("7d").
func filterFrom(q url.Values, now time.Time) (inspect.CaseFilter, error) {
	f, err := Filter{Tenant: q.Get("tenant"), Period: q.Get("period"), Reason: q.Get("reason"), Status: q.Get("status"),
		OlderThan: q.Get("older_than"), NewerThan: q.Get("newer_than")}.CaseFilter(now, "older_than", "newer_than")
	if err != nil {
		return f, err
	}
	f.After = q.Get("after")
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return f, fmt.Errorf("%w: limit %q", inspect.ErrBadFilter, v)
		}
		f.Limit = n
	}
	return f, f.Validate()
}

// Filter selects cases as people write it, in the queue page's query or
// the CLI's flags: ages ("7d") rather than times, and status "all".
type Filter struct {
	Tenant, Period, Reason, Status string
	OlderThan, NewerThan           string // ages: 90m, 2h, 7d
}

// CaseFilter is f as the store takes it, at now, not validated yet (the
// caller adds the page or limit, then validates). A bad age is an
// ErrBadFilter that names its field as olderName or newerName.
func (f Filter) CaseFilter(now time.Time, olderName, newerName string) (inspect.CaseFilter, error) {
	cf := inspect.CaseFilter{Tenant: f.Tenant, Period: f.Period, Reason: f.Reason, Status: f.Status}
	if cf.Status == "all" {
		cf.Status = ""
	}
	for _, a := range []struct {
		name, age string
		dst       *time.Time
	}{{olderName, f.OlderThan, &cf.OpenedBefore}, {newerName, f.NewerThan, &cf.OpenedAfter}} {
		if a.age == "" {
			continue
		}
		d, err := ParseAge(a.age)
		if err != nil {
			return cf, fmt.Errorf("%w: %s: %w", inspect.ErrBadFilter, a.name, err)
		}
		*a.dst = now.Add(-d)
	}
	return cf, nil
}

// ageDaysMax is the longest age in days: about 290 years, the most a
// time.Duration holds (beyond it the age wrapped round to a negative one).
const ageDaysMax = 106_751

// ParseAge reads an age: a Go duration ("90m", "2h") or whole days ("7d").
func ParseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("age %q: want a duration such as 90m, 2h or 7d", s)
		}
		if n > ageDaysMax {
			return 0, fmt.Errorf("age %q: at most %dd", s, ageDaysMax)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("age %q: want a duration such as 90m, 2h or 7d", s)
	}
	return d, nil
}

// status maps a store error to an HTTP status.
func status(err error) int {
	var re *settle.ResolveError
	switch {
	case errors.Is(err, inspect.ErrBadFilter), errors.Is(err, errBadRequest), errors.Is(err, inspect.ErrBadEdit):
		return http.StatusBadRequest
	case errors.Is(err, errForbidden), errors.Is(err, retention.ErrEditRefused):
		return http.StatusForbidden
	case errors.Is(err, settle.ErrCaseNotFound), errors.Is(err, inspect.ErrNoSuchDeadLetter):
		return http.StatusNotFound
	case errors.Is(err, settle.ErrCaseClosed), errors.As(err, &re):
		return http.StatusConflict
	case errors.Is(err, errBusy):
		return http.StatusServiceUnavailable
	case errors.Is(err, errExportTooLarge):
		return http.StatusUnprocessableEntity
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error, asJSON bool) {
	code := status(err)
	if code == http.StatusInternalServerError {
		h.log.Error("analyst request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if asJSON {
		writeJSON(w, code, map[string]string{"error": publicError(err)})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	h.render(w, r, "error", map[string]any{"Title": http.StatusText(code), "Code": code, "Error": publicError(err)})
}

// publicError is what a response says of err: its text when it is the
// client's to fix (a 4xx, whose messages this package writes), a fixed
// sentence for a 5xx, whose text may be the database's (its SQL, its
// names) and is for the service log.
func publicError(err error) string {
	switch status(err) {
	case http.StatusInternalServerError:
		return "internal error: the service log has the details; try again, and report it if it persists"
	case http.StatusGatewayTimeout:
		return "the read took longer than the request timeout: narrow the filters and try again"
	}
	return err.Error()
}

// indentJSON indents JSON token by token, as its bytes say: no decoding,
// so a number keeps every digit (no float64 round trip: 12345678901234567890
// stays itself) and a duplicate key stays where it is. ok is false when b
// is not JSON.
func indentJSON(b []byte) (out string, ok bool) {
	var buf bytes.Buffer
	if json.Indent(&buf, b, "", "  ") != nil {
		return "", false
	}
	return buf.String(), true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// render executes a page into memory first, so that a template failure is
// a clean 500 rather than half a page.
func (h *handler) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	if m, ok := data.(map[string]any); ok {
		// The header names who is signed in, their role and tenant.
		if a := analystIn(r.Context()); a.Name != "" {
			m["Me"] = a
		}
	}
	var buf bytes.Buffer
	if err := h.pages.ExecuteTemplate(&buf, name, data); err != nil {
		h.log.Error("render page", "page", name, "err", err)
		http.Error(w, "internal error rendering "+name+": see the service log", http.StatusInternalServerError)
		return
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	}
	w.Write(buf.Bytes())
}

func caseID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: case id must be a number, e.g. 42 (got %q)", errBadRequest, r.PathValue("id"))
	}
	return id, nil
}
