package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// newLogin creates a login role granted role (a role of settle's) and
// returns its name and the database URL that logs in as it. Roles belong
// to the cluster: this one is dropped at cleanup.
func newLogin(t *testing.T, dbURL, role string) (name, loginURL string) {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name = "settle_t_" + strings.TrimPrefix(role, "settle_") + "_" + hex.EncodeToString(b)
	admin := settletest.PoolOn(t, dbURL, 1)
	ctx := context.Background()
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN; GRANT %s TO %s", name, role, name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The drop comes after every pool of the login has closed
		// (cleanups run last first); a session left would hold it.
		if _, err := admin.Exec(ctx, "DROP ROLE "+name); err != nil {
			t.Errorf("drop role %s: %v", name, err)
		}
	})
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(name)
	return name, u.String()
}

// TestCLILoginRoles: the CLI acts as its database login, which holds one
// of settle's roles. A reader's `conflicts resolve` fails, says which
// grant it needs, and writes nothing, and the database refuses the same
// write made without the CLI; a resolver's resolution records the login,
// with --as only as a note after it, and so does one a resolver writes
// without the CLI naming someone else; a resolver may not close a period,
// an operator may.
func TestCLILoginRoles(t *testing.T) {
	t.Parallel()
	d := newAnalystDB(t)
	rs := d.settle(t,
		message.Input{Topic: "usage", Offset: 1, Value: usageRecord("acme", "u-1", "cust-1", "40")},
		message.Input{Topic: "usage", Offset: 2, Value: usageRecord("acme", "u-1", "cust-1", "55")},
		message.Input{Topic: "usage", Offset: 3, Value: usageRecord("globex", "u-7", "cust-9", "3")},
		message.Input{Topic: "usage", Offset: 4, Value: usageRecord("globex", "u-7", "cust-9", "4")},
	)
	acme, globex := rs[1].CaseID, rs[3].CaseID
	if acme == 0 || globex == 0 {
		t.Fatalf("fixture outcomes: %+v", rs)
	}
	ctx := context.Background()
	caseOf := func(id int64) *inspect.Case {
		t.Helper()
		c, err := inspect.New(d.store).Case(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	as := func(loginURL string, want int, args ...string) string {
		t.Helper()
		args = append(args, "--database-url", loginURL)
		code, out := runArgs(t, args...)
		if code != want {
			t.Fatalf("settle %s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, out)
		}
		return out
	}
	readerName, reader := newLogin(t, d.url, "settle_reader")
	resolverName, resolver := newLogin(t, d.url, "settle_resolver")
	_, operator := newLogin(t, d.url, "settle_operator")

	// A reader reads, and may not resolve.
	as(reader, 0, "conflicts", "list")
	out := as(reader, 1, "conflicts", "resolve", fmt.Sprint(acme), "--reject", "--reason", "duplicate", "--as", "ana")
	if !strings.Contains(out, readerName+" reads only") || !strings.Contains(out, "GRANT settle_resolver TO "+readerName) {
		t.Errorf("a reader's resolve says: %s", out)
	}
	if c := caseOf(acme); c.Status != inspect.CaseOpen || c.Resolution != nil {
		t.Fatalf("after a reader's resolve the case is %s %+v", c.Status, c.Resolution)
	}
	// Without the CLI, the database refuses the reader's write.
	rstore, err := settle.Open(ctx, settletest.PoolOn(t, reader, 2), settle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rstore.Resolve(ctx, settle.ResolveRequest{CaseID: acme, Decision: "reject", Reason: "x", By: "ana"}); err == nil ||
		!strings.Contains(err.Error(), "permission denied") {
		t.Errorf("a reader's resolve through the store: %v, want permission denied", err)
	}
	if c := caseOf(acme); c.Status != inspect.CaseOpen || c.Resolution != nil {
		t.Fatalf("after a reader's resolve through the store the case is %s %+v", c.Status, c.Resolution)
	}

	// A resolver's resolution names the login; --as is a note.
	as(resolver, 0, "conflicts", "resolve", fmt.Sprint(acme), "--reject", "--reason", "duplicate", "--as", "ana")
	if c := caseOf(acme); c.Resolution == nil || c.Resolution.By != resolverName+" (as ana)" {
		t.Errorf("the resolution records %+v, want %q", c.Resolution, resolverName+" (as ana)")
	}
	// Without the CLI, a name the resolver states is a note too.
	sstore, err := settle.Open(ctx, settletest.PoolOn(t, resolver, 2), settle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sstore.Resolve(ctx, settle.ResolveRequest{CaseID: globex, Decision: "reject", Reason: "x", By: "mallory"}); err != nil {
		t.Fatal(err)
	}
	if c := caseOf(globex); c.Resolution == nil || c.Resolution.By != resolverName+" (as mallory)" {
		t.Errorf("a resolution stating another name records %+v, want %q", c.Resolution, resolverName+" (as mallory)")
	}

	// Operating: not a resolver's, an operator's.
	out = as(resolver, 1, "period", "close", "acme", "2026-11")
	if !strings.Contains(out, "does not operate") || !strings.Contains(out, "settle_operator") {
		t.Errorf("a resolver's period close says: %s", out)
	}
	as(reader, 1, "period", "close", "acme", "2026-11")
	as(operator, 0, "period", "close", "acme", "2026-11")
}
