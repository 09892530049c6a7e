package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

// unreachableDB is a database URL nothing answers: a run that gets past
// its settings fails to connect (exit 1), so exit 2 means the settings
// were refused before anything connected.
const unreachableDB = "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"

// TestRunRefusesOpenAdminWithoutToken: an admin listener beyond loopback
// needs a token, or an explicit --admin-insecure (which starts, loudly).
// Nothing is bound: the settings are refused (exit 2) before the run
// connects, and the cases that pass fail later at the unreachable
// database (exit 1).
func TestRunRefusesOpenAdminWithoutToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokensFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokensFile, []byte("# analysts\n\nalice=alice-token-0123456789\nbob = bob-token-0123456789abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badFile := filepath.Join(dir, "bad")
	if err := os.WriteFile(badFile, []byte("alice-token-without-a-name-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		want     []string // in the output
		wantNot  []string
		warnLoud bool
	}{
		{"wildcard, no token", []string{"--admin-addr", "0.0.0.0:0"}, exitUsage, []string{"--admin-token", "--admin-insecure"}, nil, false},
		{"all interfaces, no token", []string{"--admin-addr", ":0"}, exitUsage, []string{"--admin-token", "--admin-insecure"}, nil, false},
		{"a host name, no token", []string{"--admin-addr", "settle.example:0"}, exitUsage, []string{"--admin-token"}, nil, false},
		{"insecure", []string{"--admin-addr", "0.0.0.0:0", "--admin-insecure"}, exitFailure, []string{"connect to PostgreSQL"}, nil, true},
		{"named token", []string{"--admin-addr", "0.0.0.0:0", "--admin-token", "alice=alice-token-0123456789"}, exitFailure, []string{"connect to PostgreSQL"}, []string{"alice-token"}, false},
		{"bare token", []string{"--admin-addr", "0.0.0.0:0", "--admin-token", "bare-token-0123456789"}, exitFailure, []string{"connect to PostgreSQL"}, []string{"bare-token"}, false},
		{"tokens file", []string{"--admin-addr", "0.0.0.0:0", "--admin-tokens-file", tokensFile}, exitFailure, []string{"connect to PostgreSQL"}, []string{"-token-"}, false},
		{"loopback, no token", []string{"--admin-addr", "127.0.0.1:0"}, exitFailure, []string{"connect to PostgreSQL"}, nil, false},
		{"short token", []string{"--admin-token", "alice=short"}, exitUsage, []string{"--admin-token", "alice"}, []string{"short"}, false},
		{"empty name", []string{"--admin-token", "=alice-token-0123456789"}, exitUsage, []string{"NAME=TOKEN"}, []string{"alice-token"}, false},
		{"one token, two names", []string{"--admin-token", "alice=same-token-0123456789", "--admin-token", "bob=same-token-0123456789"}, exitUsage, []string{"bob"}, []string{"same-token"}, false},
		{"file line without a name", []string{"--admin-tokens-file", badFile}, exitUsage, []string{badFile + ":1", "NAME=TOKEN"}, []string{"without-a-name"}, false},
		{"unknown role", []string{"--admin-token", "alice:admin=alice-token-0123456789"}, exitUsage, []string{"--admin-token", "read, resolve or operate"}, []string{"alice-token"}, false},
		{"bad tenant", []string{"--admin-token", "alice:read:acme/eu=alice-token-0123456789"}, exitUsage, []string{"--admin-token", "tenant"}, []string{"alice-token"}, false},
		{"missing file", []string{"--admin-tokens-file", filepath.Join(dir, "nope")}, exitUsage, []string{"--admin-tokens-file"}, nil, false},
		{"bad allowed host", []string{"--admin-allowed-hosts", "http://x/"}, exitUsage, []string{"--admin-allowed-hosts"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"run", "--database-url", unreachableDB, "--brokers", "127.0.0.1:1"}, tc.args...)
			code, out := runArgs(t, args...)
			if code != tc.code {
				t.Fatalf("settle %v: exit %d, want %d\n%s", tc.args, code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("settle %v: output lacks %q:\n%s", tc.args, w, out)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(out, w) {
					t.Errorf("settle %v: output shows %q (a token?):\n%s", tc.args, w, out)
				}
			}
			if loud := strings.Contains(out, "level=WARN") && strings.Contains(out, "without a token"); loud != tc.warnLoud {
				t.Errorf("settle %v: warning about an open listener %v, want %v:\n%s", tc.args, loud, tc.warnLoud, out)
			}
		})
	}
}

// adminService is `settle run` on a database holding two open conflict
// cases, with the admin listener on a loopback port.
type adminService struct {
	admin            string // host:port
	db               *analystDB
	acmeCase, globex int64
	out              *testnet.SyncBuffer
}

func newAdminService(t *testing.T, extra ...string) *adminService {
	t.Helper()
	d := newAnalystDB(t)
	rs := d.settle(t,
		message.Input{Topic: "usage", Offset: 0, Value: usageRecord("acme", "u-1", "cust-1", "40")},
		message.Input{Topic: "usage", Offset: 1, Value: usageRecord("acme", "u-1", "cust-1", "55")},
		message.Input{Topic: "usage", Offset: 2, Value: usageRecord("globex", "u-7", "cust-9", "3")},
		message.Input{Topic: "usage", Offset: 3, Value: usageRecord("globex", "u-7", "cust-9", "4")},
	)
	if rs[1].CaseID == 0 || rs[3].CaseID == 0 {
		t.Fatalf("fixture: no cases: %+v", rs)
	}
	broker := kafkatest.NewCluster(t, 1)
	t.Cleanup(broker.Close)
	admin := testnet.FreeAddr(t)
	args := append([]string{"run", "--database-url", d.url, "--brokers", strings.Join(broker.ListenAddrs(), ","),
		"--admin-addr", admin, "--session-timeout", "1s", "--shutdown-timeout", "10s"}, extra...)
	out, _ := startService(t, args...)
	testnet.WaitFor(t, "/livez 200", 30*time.Second, func() bool { c, _ := testnet.HTTPGet("http://" + admin + "/livez"); return c == 200 })
	return &adminService{admin: admin, db: d, acmeCase: rs[1].CaseID, globex: rs[3].CaseID, out: out}
}

// do sends one request to the admin listener with the given Host header
// ("" = the listener's own address) and headers, and returns the status
// and body. Redirects are not followed.
func (s *adminService) do(t *testing.T, method, path, host, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *adminService) caseStatus(t *testing.T, id int64) *inspect.Case {
	t.Helper()
	c, err := inspect.New(s.db.store).Case(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAdminRefusesRebinding: a page on a foreign name that resolves to
// loopback (DNS rebinding) reaches the listener with its own name in Host
// and, to the browser, same-origin: the analysts' API and pages refuse it
// (421) and nothing is resolved; the listener's own address, localhost on
// its port, and the probes on any Host are answered.
func TestAdminRefusesRebinding(t *testing.T) {
	t.Parallel()
	s := newAdminService(t)
	_, port, _ := net.SplitHostPort(s.admin)
	evil := "evil.example:" + port
	resolve := `{"decision":"accept","reason":"rebound","by":"mallory"}`
	for _, host := range []string{evil, "evil.example:8080", "evil.example", "127.0.0.1.evil.example:" + port, "localhost.:" + port + "x"} {
		code, body := s.do(t, "POST", "/api/cases/"+itoa(s.acmeCase)+"/resolve", host, resolve,
			"Content-Type", "application/json", "Sec-Fetch-Site", "same-origin")
		if code != http.StatusMisdirectedRequest || !strings.Contains(body, "Host") {
			t.Errorf("resolve with Host %s: %d %s, want 421 naming the Host", host, code, body)
		}
		form := url.Values{"decision": {"reject"}, "reason": {"rebound"}, "by": {"mallory"}}
		if code, body := s.do(t, "POST", "/cases/"+itoa(s.globex)+"/resolve", host, form.Encode(),
			"Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-origin"); code != http.StatusMisdirectedRequest {
			t.Errorf("form resolve with Host %s: %d %s, want 421", host, code, body)
		}
		for _, path := range []string{"/api/cases", "/api/cases/" + itoa(s.acmeCase), "/cases", "/", "/api/dlq", "/static/style.css"} {
			if code, body := s.do(t, "GET", path, host, "", "Sec-Fetch-Site", "same-origin"); code != http.StatusMisdirectedRequest || strings.Contains(body, "cust-1") {
				t.Errorf("GET %s with Host %s: %d, want 421 and no case data:\n%s", path, host, code, body)
			}
		}
	}
	for _, id := range []int64{s.acmeCase, s.globex} {
		if c := s.caseStatus(t, id); c.Status != inspect.CaseOpen || c.Resolution != nil {
			t.Fatalf("case %d after rebound requests: %s %+v", id, c.Status, c.Resolution)
		}
	}
	// Probes (kubelet, Prometheus) name the pod by IP or any name: exempt.
	for _, path := range []string{"/livez", "/metrics"} {
		if code, _ := s.do(t, "GET", path, evil, ""); code != 200 {
			t.Errorf("GET %s with Host %s: %d, want 200 (probes are exempt)", path, evil, code)
		}
	}
	for _, host := range []string{"", "localhost:" + port, "LOCALHOST:" + port} {
		if code, body := s.do(t, "GET", "/api/cases", host, ""); code != 200 || !strings.Contains(body, "cust-1") {
			t.Errorf("GET /api/cases with Host %q: %d %s", host, code, body)
		}
	}
	code, body := s.do(t, "POST", "/api/cases/"+itoa(s.acmeCase)+"/resolve", "", `{"decision":"reject","reason":"duplicate meter","by":"ana"}`,
		"Content-Type", "application/json", "Sec-Fetch-Site", "same-origin")
	if code != 200 {
		t.Fatalf("resolve on the listener's own address: %d %s", code, body)
	}
	if c := s.caseStatus(t, s.acmeCase); c.Status != inspect.CaseRejected || c.Resolution == nil || c.Resolution.By != "ana" {
		t.Errorf("without tokens the form's name is recorded: %s %+v", c.Status, c.Resolution)
	}
}

// TestAdminAllowedHosts: a name in --admin-allowed-hosts (a bare name: any
// port; host:port: that port only) is answered; others still are not.
func TestAdminAllowedHosts(t *testing.T) {
	t.Parallel()
	s := newAdminService(t, "--admin-allowed-hosts", "analysts.example,settle.internal:9443")
	for host, want := range map[string]int{
		"analysts.example": 200, "analysts.example:443": 200, "Analysts.Example:80": 200,
		"settle.internal:9443": 200, "settle.internal:9444": 421, "settle.internal": 421,
		"evil.example": 421, "example": 421,
	} {
		if code, _ := s.do(t, "GET", "/api/cases", host, ""); code != want {
			t.Errorf("GET /api/cases with Host %s: %d, want %d", host, code, want)
		}
	}
}

// TestAdminTokenNamesTheAnalyst: with tokens, a resolution records the name
// its token carries, whatever name the body or the form states; a token of
// the file works as one of the flag does; an unknown token is refused.
func TestAdminTokenNamesTheAnalyst(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("# one analyst a line\ncarol=carol-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newAdminService(t, "--admin-token", "alice=alice-token-0123456789", "--admin-token", "bob=bob-token-0123456789",
		"--admin-tokens-file", file)
	path := "/api/cases/" + itoa(s.acmeCase) + "/resolve"
	body := `{"decision":"accept","reason":"meter re-read","by":"mallory"}`
	for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Bearer alice", "Bearer alice=alice-token-0123456789", "alice-token-0123456789"} {
		if code, _ := s.do(t, "POST", path, "", body, "Content-Type", "application/json", "Authorization", auth); code != http.StatusUnauthorized {
			t.Errorf("resolve with Authorization %q: %d, want 401", auth, code)
		}
	}
	if c := s.caseStatus(t, s.acmeCase); c.Status != inspect.CaseOpen {
		t.Fatalf("case %s after unauthorised requests", c.Status)
	}
	if code, out := s.do(t, "POST", path, "", body, "Content-Type", "application/json", "Authorization", "Bearer alice-token-0123456789"); code != 200 {
		t.Fatalf("resolve with alice's token: %d %s", code, out)
	}
	if c := s.caseStatus(t, s.acmeCase); c.Status != inspect.CaseAccepted || c.Resolution == nil || c.Resolution.By != "alice" {
		t.Errorf("resolved with alice's token, the body saying mallory: %s %+v, want by alice", c.Status, c.Resolution)
	}
	// The page says who is signed in, and the form needs no name.
	if code, page := s.do(t, "GET", "/cases/"+itoa(s.globex), "", "", "Authorization", "Bearer carol-token-0123456789"); code != 200 || !strings.Contains(page, "carol") {
		t.Errorf("case page with carol's token: %d, want it to name carol", code)
	}
	form := url.Values{"decision": {"reject"}, "reason": {"duplicate meter"}, "by": {"mallory"}}
	if code, out := s.do(t, "POST", "/cases/"+itoa(s.globex)+"/resolve", "", form.Encode(), "Content-Type", "application/x-www-form-urlencoded",
		"Authorization", "Bearer carol-token-0123456789", "Sec-Fetch-Site", "same-origin"); code != http.StatusSeeOther {
		t.Fatalf("form resolve with carol's token (from the file): %d %s", code, out)
	}
	if c := s.caseStatus(t, s.globex); c.Status != inspect.CaseRejected || c.Resolution == nil || c.Resolution.By != "carol" {
		t.Errorf("resolved by form with carol's token, the form saying mallory: %s %+v, want by carol", c.Status, c.Resolution)
	}
	if strings.Contains(s.out.String(), "-token-0123456789") {
		t.Errorf("a token is in the service's output:\n%s", s.out.String())
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestDevRefusesOpenAdminWithoutToken: `settle dev` shares the admin flags
// and the refusal, before it starts its broker.
func TestDevRefusesOpenAdminWithoutToken(t *testing.T) {
	t.Parallel()
	code, out := runArgs(t, "dev", "--admin-addr", "0.0.0.0:0", "--kafka-addr", testnet.FreeAddr(t), "--database-url", unreachableDB)
	if code != exitUsage || !strings.Contains(out, "--admin-insecure") || strings.Contains(out, "kafka:") {
		t.Errorf("settle dev --admin-addr 0.0.0.0:0: exit %d, want 2 before the broker starts:\n%s", code, out)
	}
}

// TestAdminTokenRoles: NAME[:ROLE[:TENANT]]=TOKEN gives the analyst a role
// and a tenant; a token without a role, as every token was configured
// before roles, operates on every tenant; a tenant may hold a colon.
func TestAdminTokenRoles(t *testing.T) {
	t.Parallel()
	s, err := adminFlags{AdminAddr: "127.0.0.1:0", AdminTokens: []string{
		"rita:read=rita-token-0123456789", "rob:resolve:acme=rob-token-0123456789", "otto:Operate:eu:acme=otto-token-0123456789",
		"lee=lee-token-0123456789", "bare-token-0123456789",
	}}.settings()
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]analyst.Analyst{
		"rita-token-0123456789": {Name: "rita", Role: analyst.RoleRead},
		"rob-token-0123456789":  {Name: "rob", Role: analyst.RoleResolve, Tenant: "acme"},
		"otto-token-0123456789": {Name: "otto", Role: analyst.RoleOperate, Tenant: "eu:acme"},
		"lee-token-0123456789":  {Name: "lee", Role: analyst.RoleOperate},
		"bare-token-0123456789": {Name: adminNameBareToken, Role: analyst.RoleOperate},
	} {
		if got := s.tokens[tok]; got != want {
			t.Errorf("%s: %+v, want %+v", want.Name, got, want)
		}
	}
}
