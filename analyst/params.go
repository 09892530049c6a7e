package analyst

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"
)

// badText says why s cannot be a parameter, "" when it can: PostgreSQL's
// text takes UTF-8 without NUL, so anything else is the client's mistake,
// refused here with its name rather than by the database as a 500.
func badText(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL byte"
	}
	return ""
}

// wildcards are the names of a route pattern's path wildcards: id in
// "GET /cases/{id}", rest in "/files/{rest...}".
var wildcardRE = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)(?:\.\.\.)?\}`)

func wildcards(pattern string) []string {
	var names []string
	for _, m := range wildcardRE.FindAllStringSubmatch(pattern, -1) {
		names = append(names, m[1])
	}
	return names
}

// checkParams refuses with 400 (through refuse, in the route's kind: the
// error page, or JSON under /api/), naming the parameter, a path value or
// a query parameter's name or value that is not text the database can
// hold. Every route is registered through it, so no handler sees such
// bytes. (Form and JSON bodies are checked where they are read:
// resolveInput.request.)
func checkParams(pattern string, next http.Handler, refuse func(http.ResponseWriter, *http.Request, error)) http.Handler {
	names := wildcards(pattern)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, n := range names {
			if why := badText(r.PathValue(n)); why != "" {
				refuse(w, r, badParam(fmt.Sprintf("path parameter %s %s", n, why)))
				return
			}
		}
		for k, vs := range r.URL.Query() {
			if why := badText(k); why != "" {
				refuse(w, r, badParam(fmt.Sprintf("query parameter name %q %s", k, why)))
				return
			}
			for _, v := range vs {
				if why := badText(v); why != "" {
					refuse(w, r, badParam(fmt.Sprintf("query parameter %s %s", k, why)))
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// badParam is the error of a parameter the database cannot hold.
func badParam(msg string) error {
	return fmt.Errorf("%w: %s; send UTF-8 text without NUL bytes", errBadRequest, msg)
}
