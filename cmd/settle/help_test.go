package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// helpLinesMax is what fits a terminal of 24x80 with some scrolling: the
// help of settle and of each command must not run past it.
const helpLinesMax = 40

// leafCommands lists every command path a user can run ("run",
// "conflicts list", ...), from the same model the parser uses.
func leafCommands(t *testing.T) []string {
	t.Helper()
	var c cli
	k, err := kong.New(&c, kong.Name("settle"), kong.Exit(func(int) {}))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range k.Model.Leaves(true) {
		out = append(out, n.Path())
	}
	if len(out) < 10 {
		t.Fatalf("found %d commands (%v): the model walk is broken", len(out), out)
	}
	return out
}

// envName matches an environment variable name as help prints it.
var envName = regexp.MustCompile(`\b(SETTLE_[A-Z0-9_]+|DATABASE_URL|KAFKA_BROKERS|OTEL_[A-Z_]+)\b`)

// TestHelpFitsAScreen: `settle --help` and every command's --help fit
// helpLinesMax lines, and no environment variable is named twice (kong
// prints it beside its flag; a help text that names it again doubles it).
// --help-all shows the flags the short help leaves out, each variable once
// there too.
func TestHelpFitsAScreen(t *testing.T) {
	t.Parallel()
	cmds := append([]string{""}, leafCommands(t)...)
	for _, cmd := range cmds {
		for _, flag := range []string{"--help", "--help-all"} {
			args := append(strings.Fields(cmd), flag)
			code, out := runArgs(t, args...)
			if code != exitOK {
				t.Errorf("settle %s: exit %d, want 0\n%s", strings.Join(args, " "), code, out)
				continue
			}
			lines := strings.Count(out, "\n")
			if flag == "--help" && lines > helpLinesMax {
				t.Errorf("settle %s: %d lines, want at most %d:\n%s", strings.Join(args, " "), lines, helpLinesMax, out)
			}
			seen := map[string]int{}
			for _, m := range envName.FindAllString(out, -1) {
				seen[m]++
			}
			for name, n := range seen {
				if n > 1 {
					t.Errorf("settle %s names %s %d times, want once", strings.Join(args, " "), name, n)
				}
			}
		}
	}
}

// TestHelpAllShowsEveryFlag: every flag of run is in `settle run
// --help-all`, hidden from the short help or not.
func TestHelpAllShowsEveryFlag(t *testing.T) {
	t.Parallel()
	var c cli
	k, err := kong.New(&c, kong.Name("settle"), kong.Exit(func(int) {}))
	if err != nil {
		t.Fatal(err)
	}
	_, out := runArgs(t, "run", "--help-all")
	for _, n := range k.Model.Leaves(true) {
		if n.Path() != "run" {
			continue
		}
		for _, group := range n.AllFlags(false) {
			for _, f := range group {
				if !strings.Contains(out, "--"+f.Name) {
					t.Errorf("settle run --help-all does not show --%s", f.Name)
				}
			}
		}
	}
}

// TestHelpEndsWithAnExample: `settle --help` and every command's --help end
// with an example of that command, which parses (its flags and arguments
// exist); a choice of required flags reads as one in the usage line; and
// the read-only commands list no topic flag (they write to none).
func TestHelpEndsWithAnExample(t *testing.T) {
	t.Parallel()
	for _, cmd := range append([]string{""}, leafCommands(t)...) {
		_, out := runArgs(t, append(strings.Fields(cmd), "--help")...)
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		last := lines[len(lines)-1]
		ex, ok := strings.CutPrefix(last, "Example: ")
		if !ok || !strings.HasPrefix(ex, strings.TrimSpace("settle "+cmd)) {
			t.Errorf("settle %s --help ends with %q, want an example of it", cmd, last)
			continue
		}
		var c cli
		k, err := kong.New(&c, kong.Name("settle"), kong.Exit(func(int) {}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Parse(shellWords(strings.TrimPrefix(ex, "settle "))); err != nil {
			t.Errorf("the example of settle %s does not parse: %s: %v", cmd, ex, err)
		}
	}
	if _, out := runArgs(t, "conflicts", "resolve", "--help"); !strings.Contains(out, "(--accept | --reject)") {
		t.Errorf("conflicts resolve's usage line:\n%s", out)
	}
	for _, cmd := range []string{"conflicts list", "conflicts show", "conflicts diff", "conflicts export", "dlq list", "dlq show", "balance", "explain"} {
		if _, out := runArgs(t, append(strings.Fields(cmd), "--help-all")...); strings.Contains(out, "--topic") {
			t.Errorf("settle %s lists --topic, which it does not use", cmd)
		}
	}
}

// shellWords splits a command line at spaces outside double quotes.
func shellWords(s string) []string {
	var out []string
	var w strings.Builder
	quoted, any := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, any = !quoted, true
		case r == ' ' && !quoted:
			if any {
				out = append(out, w.String())
			}
			w.Reset()
			any = false
		default:
			w.WriteRune(r)
			any = true
		}
	}
	if any {
		out = append(out, w.String())
	}
	return out
}
