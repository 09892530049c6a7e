package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrBinariesNotFound is wrapped by FindBinaries (and therefore Start) when
// the PostgreSQL server programs are not installed. It is a sentinel so that
// tests can tell "this machine has no PostgreSQL" (skippable on a laptop)
// apart from "PostgreSQL is installed but broken" (always a failure).
var ErrBinariesNotFound = errors.New("pgcluster: PostgreSQL server binaries (initdb, pg_ctl, postgres) not found")

// installHint is appended to ErrBinariesNotFound so the person reading the
// error knows the exact command to run instead of having to search for it.
const installHint = "install them with `apt-get install postgresql` (Debian/Ubuntu) " +
	"or `brew install postgresql@15` (macOS), or put the directory containing " +
	"initdb, pg_ctl and postgres on PATH"

// requiredPrograms are the server programs a cluster needs. All three must
// come from the same directory: mixing an initdb of one major version with a
// postgres of another produces a data directory the server refuses to open.
var requiredPrograms = []string{"initdb", "pg_ctl", "postgres"}

// FindBinaries returns the directory that holds initdb, pg_ctl and postgres.
//
// It looks on PATH first, so an explicit choice by the user wins, and then in
// the places packagers put the server programs without adding them to PATH:
// Debian/Ubuntu's /usr/lib/postgresql/<major>/bin, the PGDG RPMs'
// /usr/pgsql-<major>/bin and Homebrew's keg-only postgresql@<major> (highest
// major version first, because a newer server can be used by any client
// settle supports). When nothing is found the error wraps
// ErrBinariesNotFound and says how to install PostgreSQL.
func FindBinaries() (dir string, err error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		// Resolve symlinks (e.g. /usr/local/bin/initdb ->
		// /usr/lib/postgresql/15/bin/initdb) so that the siblings we
		// check, and the share/ directory postgres derives from its own
		// location, belong to the same installation.
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		if d := filepath.Dir(p); hasAll(d) {
			return d, nil
		}
	}
	for _, pattern := range []string{
		"/usr/lib/postgresql/*/bin",
		"/usr/pgsql-*/bin",
		"/opt/homebrew/opt/postgresql@*/bin",
		"/usr/local/opt/postgresql@*/bin",
	} {
		matches, _ := filepath.Glob(pattern)
		sortByVersionDesc(matches)
		for _, d := range matches {
			if hasAll(d) {
				return d, nil
			}
		}
	}
	return "", fmt.Errorf("%w in PATH or /usr/lib/postgresql/*/bin; %s", ErrBinariesNotFound, installHint)
}

// hasAll reports whether every required program is an executable file in dir.
func hasAll(dir string) bool {
	for _, name := range requiredPrograms {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// sortByVersionDesc orders install directories by the first number in their
// path, highest first, so "/usr/lib/postgresql/16/bin" beats ".../9.6/bin"
// (a plain string sort would put 9.6 first).
func sortByVersionDesc(dirs []string) {
	version := func(s string) float64 {
		start := strings.IndexAny(s, "0123456789")
		if start < 0 {
			return -1
		}
		end := start
		for end < len(s) && (s[end] == '.' || (s[end] >= '0' && s[end] <= '9')) {
			end++
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(s[start:end], "."), 64)
		if err != nil {
			return -1
		}
		return v
	}
	sort.SliceStable(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
}
