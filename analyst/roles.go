package analyst

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

// Role is what an analyst may do. Each role includes the ones before it:
// a resolver reads, an operator reads and resolves.
type Role int

// The roles, in order. The zero Role is RoleOperate (see Analyst.Role).
const (
	RoleRead    Role = iota + 1 // every page and read of the API, exports, the replay's list
	RoleResolve                 // and resolving cases
	RoleOperate                 // and replaying dead letters
)

// roleNames are the roles as flags, files and the OpenAPI document write them.
var roleNames = map[Role]string{RoleRead: "read", RoleResolve: "resolve", RoleOperate: "operate"}

func (r Role) String() string {
	if n, ok := roleNames[r.orDefault()]; ok {
		return n
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// orDefault is r, with the zero Role read as RoleOperate.
func (r Role) orDefault() Role {
	if r == 0 {
		return RoleOperate
	}
	return r
}

// ParseRole reads a role's name: read, resolve or operate.
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if strings.EqualFold(s, n) {
			return r, nil
		}
	}
	return 0, fmt.Errorf("role %q: want read, resolve or operate", s)
}

// Analyst is whom a token names and what it may do.
type Analyst struct {
	// Name is what a resolution records as its author.
	Name string
	// Role is what the token may do. The zero Role is RoleOperate, so
	// that a token configured before roles existed keeps every right it
	// had.
	Role Role
	// Tenant is the one tenant whose cases, accounts, dead letters,
	// statements and counts the token sees; "" = every tenant.
	Tenant string
}

// may reports whether a can do what role allows.
func (a Analyst) may(role Role) bool { return a.Role.orDefault() >= role }

// anyone is the analyst of a surface without tokens: on loopback, whoever
// reaches the port operates on every tenant, as before tokens.
var anyone = Analyst{Role: RoleOperate}

// analystKey is the request context's key of the authenticated analyst.
type analystKey struct{}

// analystIn is the analyst a request's context carries (anyone when the
// surface has no tokens).
func analystIn(ctx context.Context) Analyst {
	if a, ok := ctx.Value(analystKey{}).(Analyst); ok {
		return a
	}
	return anyone
}

// analystOf is the name of the analyst whose token the request carried;
// "" when the surface has no tokens.
func analystOf(r *http.Request) string { return analystIn(r.Context()).Name }

// errForbidden answers a request its token's role or tenant does not allow.
var errForbidden = errors.New("forbidden")

// requireRole answers 403 to an analyst whose role is below role; the
// route's handler runs otherwise.
func requireRole(role Role, next http.Handler, refuse func(http.ResponseWriter, *http.Request, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := analystIn(r.Context()); !a.may(role) {
			refuse(w, r, fmt.Errorf("%w: %s's token has the role %s; %s %s needs the role %s: ask whoever runs settle for a token with it",
				errForbidden, a.Name, a.Role.orDefault(), r.Method, r.URL.Path, role))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// can is what the page offers its analyst: a reader sees no resolve form
// and no replay button.
type can struct{ Resolve, Operate bool }

func canOf(r *http.Request) can {
	a := analystIn(r.Context())
	return can{Resolve: a.may(RoleResolve), Operate: a.may(RoleOperate)}
}

// tenantScoped is the store as one request's analyst sees it: every read
// and every resolution goes through it, and keeps to the analyst's tenant
// (from the context each call gets). Out of scope, a filter's tenant is
// 403; a case or dead letter by id is "no such" (its existence is not
// another tenant's business); a filter without a tenant gets the
// analyst's.
type tenantScoped struct{ Store }

// scope is the tenant a read asking for asked may read: asked when the
// analyst has every tenant, or asked is its tenant; its tenant when asked
// is "".
func scope(ctx context.Context, asked string) (string, error) {
	a := analystIn(ctx)
	switch {
	case a.Tenant == "", asked == a.Tenant:
		return asked, nil
	case asked == "":
		return a.Tenant, nil
	}
	return "", fmt.Errorf("%w: %s's token reads tenant %q only, not %q", errForbidden, a.Name, a.Tenant, asked)
}

// inScope reports whether the analyst of ctx sees tenant's things.
func inScope(ctx context.Context, tenant string) bool {
	t := analystIn(ctx).Tenant
	return t == "" || t == tenant
}

func (s tenantScoped) ListCases(ctx context.Context, f inspect.CaseFilter) (p *inspect.CasePage, err error) {
	if f.Tenant, err = scope(ctx, f.Tenant); err != nil {
		return nil, err
	}
	return s.Store.ListCases(ctx, f)
}

func (s tenantScoped) CountCasesUpTo(ctx context.Context, f inspect.CaseFilter, rowsMax int) (n int64, err error) {
	if f.Tenant, err = scope(ctx, f.Tenant); err != nil {
		return 0, err
	}
	return s.Store.CountCasesUpTo(ctx, f, rowsMax)
}

func (s tenantScoped) CountCases(ctx context.Context, tenant, period string) ([]inspect.CaseCount, error) {
	tenant, err := scope(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return s.Store.CountCases(ctx, tenant, period)
}

func (s tenantScoped) Case(ctx context.Context, id int64) (*inspect.Case, error) {
	c, err := s.Store.Case(ctx, id)
	if err == nil && !inScope(ctx, c.TenantID) {
		return nil, fmt.Errorf("case %d: %w", id, settle.ErrCaseNotFound)
	}
	return c, err
}

func (s tenantScoped) CaseLinks(ctx context.Context, id int64) (*inspect.CaseLinks, error) {
	if _, err := s.Case(ctx, id); err != nil {
		return nil, err
	}
	return s.Store.CaseLinks(ctx, id)
}

// CaseResolutions is the inner store's: the ids it is asked about come
// from a ListCases of this store, in scope already.

func (s tenantScoped) Resolve(ctx context.Context, req settle.ResolveRequest) (*settle.Resolution, error) {
	if _, err := s.Case(ctx, req.CaseID); err != nil {
		return nil, err
	}
	return s.Store.Resolve(ctx, req)
}

func (s tenantScoped) Explain(ctx context.Context, tenant, period, recordID string) (*inspect.Explanation, error) {
	tenant, err := scope(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return s.Store.Explain(ctx, tenant, period, recordID)
}

func (s tenantScoped) OutcomeTimeline(ctx context.Context, tenant string, since time.Time) ([]inspect.OutcomeBucket, error) {
	tenant, err := scope(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return s.Store.OutcomeTimeline(ctx, tenant, since)
}

func (s tenantScoped) Attention(ctx context.Context, tenant string, since time.Time) (*inspect.Attention, error) {
	tenant, err := scope(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return s.Store.Attention(ctx, tenant, since)
}

func (s tenantScoped) OpenCaseAges(ctx context.Context, tenant string, now time.Time, bounds []time.Duration) ([]inspect.AgeBucket, error) {
	tenant, err := scope(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return s.Store.OpenCaseAges(ctx, tenant, now, bounds)
}

func (s tenantScoped) SettledByHour(ctx context.Context, tenant string, since time.Time) ([]inspect.SettledHour, error) {
	tenant, err := scope(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return s.Store.SettledByHour(ctx, tenant, since)
}

func (s tenantScoped) SubjectAttention(ctx context.Context, tenant, subject string) (*inspect.SubjectAttention, error) {
	tenant, err := scope(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return s.Store.SubjectAttention(ctx, tenant, subject)
}

func (s tenantScoped) DeadLetters(ctx context.Context, f inspect.DeadLetterFilter) (ds []inspect.DeadLetter, err error) {
	if f.Tenant, err = scope(ctx, f.Tenant); err != nil {
		return nil, err
	}
	return s.Store.DeadLetters(ctx, f)
}

func (s tenantScoped) DeadLetter(ctx context.Context, id int64) (*inspect.DeadLetter, error) {
	d, err := s.Store.DeadLetter(ctx, id)
	if err == nil && !inScope(ctx, d.TenantID) {
		return nil, fmt.Errorf("dead letter %d: %w", id, inspect.ErrNoSuchDeadLetter)
	}
	return d, err
}

func (s tenantScoped) DeadLetterBySource(ctx context.Context, tenant string, c message.Coordinates) (int64, error) {
	if !inScope(ctx, tenant) {
		return 0, fmt.Errorf("dead letter of %s/%d@%d: %w", c.Topic, c.Partition, c.Offset, inspect.ErrNoSuchDeadLetter)
	}
	return s.Store.DeadLetterBySource(ctx, tenant, c)
}

func (s tenantScoped) DeadLetterEdits(ctx context.Context, tenant string, id int64) ([]inspect.DeadLetterEdit, error) {
	if !inScope(ctx, tenant) {
		return nil, fmt.Errorf("dead letter %d: %w", id, inspect.ErrNoSuchDeadLetter)
	}
	return s.Store.DeadLetterEdits(ctx, tenant, id)
}

func (s tenantScoped) LastReplays(ctx context.Context, ds []inspect.DeadLetter) ([]*message.Coordinates, error) {
	for _, d := range ds {
		if !inScope(ctx, d.TenantID) {
			return nil, fmt.Errorf("dead letter %d: %w", d.ID, inspect.ErrNoSuchDeadLetter)
		}
	}
	return s.Store.LastReplays(ctx, ds)
}

func (s tenantScoped) Search(ctx context.Context, q inspect.SearchQuery) (hits []inspect.SearchHit, err error) {
	if q.Tenant, err = scope(ctx, q.Tenant); err != nil {
		return nil, err
	}
	if hits, err = s.Store.Search(ctx, q); err != nil {
		return nil, err
	}
	kept := hits[:0] // the query kept to the tenant already; this keeps the answer to it
	for _, h := range hits {
		if inScope(ctx, h.TenantID) {
			kept = append(kept, h)
		}
	}
	return kept, nil
}

func (s tenantScoped) Balances(ctx context.Context, tenant, subject string, rowsMax int) ([]inspect.AccountView, error) {
	tenant, err := scope(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return s.Store.Balances(ctx, tenant, subject, rowsMax)
}

func (s tenantScoped) AccountSettlements(ctx context.Context, tenant, subject, currency string, limit int) ([]inspect.AccountSettlement, error) {
	tenant, err := scope(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return s.Store.AccountSettlements(ctx, tenant, subject, currency, limit)
}

// Statement is the inner store's, when it serves statements.
func (s tenantScoped) Statement(ctx context.Context, in inspect.StatementInput) (*inspect.Statement, error) {
	ss, ok := s.Store.(StatementStore)
	if !ok {
		return nil, errNoStatements
	}
	var err error
	if in.TenantID, err = scope(ctx, in.TenantID); err != nil {
		return nil, err
	}
	return ss.Statement(ctx, in)
}
