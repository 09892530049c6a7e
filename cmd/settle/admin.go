package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/service"
)

// adminFlags configure the admin listener of `settle run` and `settle dev`:
// the probes, /metrics, and the analysts' page and API, which read every
// tenant's cases (subjects are personal data) and resolve them.
type adminFlags struct {
	AdminAddr         string   `name:"admin-addr" env:"SETTLE_ADMIN_ADDR" default:"127.0.0.1:8080" help:"Address of /livez, /readyz, /metrics and the analysts' page (beyond loopback: needs a token)."`
	AdminTokens       []string `name:"admin-token" env:"SETTLE_ADMIN_TOKEN" sep:"," placeholder:"NAME[:ROLE[:TENANT]]=TOKEN" help:"An analyst's token, repeatable; ROLE read, resolve or operate (default); TENANT: the one it sees."`
	AdminTokensFile   string   `name:"admin-tokens-file" hidden:"" env:"SETTLE_ADMIN_TOKENS_FILE" type:"path" placeholder:"PATH" help:"File of analysts' tokens, NAME[:ROLE[:TENANT]]=TOKEN a line, # comments."`
	AdminAllowedHosts []string `name:"admin-allowed-hosts" hidden:"" env:"SETTLE_ADMIN_ALLOWED_HOSTS" sep:"," placeholder:"HOST[:PORT]" help:"Host names the analysts' page answers besides the listener's own address."`
	AdminTimeZone     string   `name:"admin-time-zone" hidden:"" env:"SETTLE_ADMIN_TIME_ZONE" placeholder:"ZONE" help:"IANA zone (Europe/Paris) the analysts' page shows, beside UTC, when a time is hovered; empty = UTC and the age only."`
	AdminInsecure     bool     `name:"admin-insecure" hidden:"" env:"SETTLE_ADMIN_INSECURE" help:"Serve the analysts' page beyond loopback without a token: whoever reaches the port reads and resolves every case."`
}

// Limits of the analysts' tokens.
const (
	// adminTokenBytesMin: a shorter token can be guessed.
	adminTokenBytesMin = 16
	// adminNameBareToken is the analyst a token given without a name is.
	adminNameBareToken = "admin"
)

// adminName is the grammar of an analyst's name, as resolutions record it.
var adminName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$`)

// adminTenant is the grammar of a tenant id (package record's).
var adminTenant = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// adminSettings are the checked admin flags.
type adminSettings struct {
	tokens   map[string]analyst.Analyst // token → analyst, role, tenant
	hosts    []string                   // --admin-allowed-hosts
	insecure bool                       // beyond loopback without a token, asked for
	zone     *time.Location             // --admin-time-zone; nil = none
}

// settings checks the flags before anything is bound or connected, so a
// mistake is reported at once (exit 2) with the flag to fix. No token is
// ever part of an error.
func (f adminFlags) settings() (adminSettings, error) {
	s := adminSettings{tokens: map[string]analyst.Analyst{}}
	// add reads who (NAME[:ROLE[:TENANT]]): a token without a role
	// operates on every tenant, as every token did before roles.
	add := func(where, who, token string) error {
		parts := strings.SplitN(who, ":", 3) // a tenant may hold a colon, a name may not
		name := parts[0]
		a := analyst.Analyst{Name: name, Role: analyst.RoleOperate}
		if len(parts) > 1 {
			r, err := analyst.ParseRole(parts[1])
			if err != nil {
				return usageError{fmt.Sprintf("%s: %s: %v", where, name, err)}
			}
			a.Role = r
		}
		if len(parts) > 2 {
			if a.Tenant = parts[2]; !adminTenant.MatchString(a.Tenant) {
				return usageError{fmt.Sprintf("%s: %s: tenant %q: 1-128 characters of A-Za-z0-9._:-, as records write it", where, name, a.Tenant)}
			}
		}
		switch {
		case !adminName.MatchString(name):
			return usageError{fmt.Sprintf("%s: analyst name %q: write NAME=TOKEN, NAME of letters, digits and ._@+- (at most 128)", where, name)}
		case len(token) < adminTokenBytesMin:
			return usageError{fmt.Sprintf("%s: the token of %s is %d bytes: use at least %d random bytes", where, name, len(token), adminTokenBytesMin)}
		}
		if other, ok := s.tokens[token]; ok && other != a {
			return usageError{fmt.Sprintf("%s: the token of %s is also %s's: one token, one analyst", where, name, other.Name)}
		}
		s.tokens[token] = a
		return nil
	}
	for _, nt := range f.AdminTokens {
		name, token, named := strings.Cut(nt, "=")
		if !named { // a token from before tokens were named
			name, token = adminNameBareToken, nt
		}
		if err := add("--admin-token", strings.TrimSpace(name), strings.TrimSpace(token)); err != nil {
			return s, err
		}
	}
	if f.AdminTokensFile != "" {
		b, err := os.ReadFile(f.AdminTokensFile)
		if err != nil {
			return s, usageError{fmt.Sprintf("--admin-tokens-file: %v", err)}
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			where := fmt.Sprintf("--admin-tokens-file %s:%d", f.AdminTokensFile, n)
			name, token, ok := strings.Cut(line, "=")
			if !ok {
				return s, usageError{where + ": write NAME=TOKEN, or NAME:ROLE[:TENANT]=TOKEN"}
			}
			if err := add(where, strings.TrimSpace(name), strings.TrimSpace(token)); err != nil {
				return s, err
			}
		}
		if err := sc.Err(); err != nil {
			return s, usageError{fmt.Sprintf("--admin-tokens-file %s: %v", f.AdminTokensFile, err)}
		}
	}
	for _, h := range f.AdminAllowedHosts {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if err := checkHostName(h); err != nil {
			return s, usageError{fmt.Sprintf("--admin-allowed-hosts %q: %v", h, err)}
		}
		s.hosts = append(s.hosts, h)
	}
	if f.AdminTimeZone != "" {
		zone, err := time.LoadLocation(f.AdminTimeZone)
		if err != nil {
			return s, usageError{fmt.Sprintf("--admin-time-zone %q: %v (an IANA name such as Europe/Paris)", f.AdminTimeZone, err)}
		}
		s.zone = zone
	}
	host, _, err := net.SplitHostPort(f.AdminAddr)
	if err != nil {
		return s, usageError{fmt.Sprintf("--admin-addr %q: %v", f.AdminAddr, err)}
	}
	if len(s.tokens) == 0 && !service.LoopbackHost(host) {
		if !f.AdminInsecure {
			return s, usageError{fmt.Sprintf("--admin-addr %s is beyond loopback and no analyst has a token: anyone who reaches it would read and resolve every tenant's cases. "+
				"Give --admin-token NAME=TOKEN (or SETTLE_ADMIN_TOKEN, --admin-tokens-file), keep it on 127.0.0.1, or pass --admin-insecure if a network policy guards it", f.AdminAddr)}
		}
		s.insecure = true
	}
	return s, nil
}

// checkHostName checks an --admin-allowed-hosts entry: a name or address,
// with or without :port.
func checkHostName(h string) error {
	name := h
	if strings.HasPrefix(h, "[") || strings.Count(h, ":") == 1 {
		var port string
		var err error
		if name, port, err = net.SplitHostPort(h); err != nil {
			return err
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return fmt.Errorf("port %q is not a port", port)
		}
	}
	if name == "" || strings.ContainsAny(name, "/?#@%[] \t") {
		return fmt.Errorf("want host or host:port, not a URL")
	}
	return nil
}

// warnAdminInsecure says, as loudly as a log can, that --admin-insecure
// opened the analysts' page to whoever reaches the address.
func warnAdminInsecure(a *app, addr string) {
	a.log.Warn("INSECURE: the admin listener serves the analysts' page and API beyond loopback without a token (--admin-insecure): "+
		"anyone who reaches it reads every tenant's cases and resolves them; give --admin-token NAME=TOKEN", "addr", addr)
}
