// Package proctest runs a program, as a rule the real settle binary, as a
// child process of a test (internal/child): it builds cmd/settle once per
// test process, starts the child with a clean environment and its output in
// a log file in the test's directory, kills what is still running at
// cleanup and prints the tail of the log when the test failed.
//
// It is test support, shared by the multi-process tests (e2e/, e2e/faults/):
// production code must never import it.
package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/settlehq/settle/internal/child"
	"github.com/settlehq/settle/internal/testnet"
)

const (
	// LogTailBytesMax is the most of a child's log that Log returns.
	LogTailBytesMax = 1 << 20
	// failureLogBytesMax is the most of a child's log printed when its
	// test failed: the end, where a failure shows.
	failureLogBytesMax = 16 << 10
)

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

// Binary builds cmd/settle once per test process and returns the path of
// the binary: the production one, as users run it.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "settle-bin-"); buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "settle")
		out, err := exec.Command("go", "build", "-o", buildPath, "github.com/settlehq/settle/cmd/settle").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build cmd/settle: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// Main runs m's tests and then removes the binary Binary built, returning
// the exit code: a package's TestMain is os.Exit(proctest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if buildDir != "" {
		if err := os.RemoveAll(buildDir); err != nil {
			fmt.Fprintf(os.Stderr, "proctest: remove the binary's directory: %v\n", err)
		}
	}
	return code
}

// CleanEnv is this process's environment minus every setting settle
// reads, plus extra: a child sees only what its test passes (a
// developer's DATABASE_URL must not leak in).
func CleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SETTLE_") || strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "KAFKA_BROKERS=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// Options say what to start.
type Options struct {
	// Name names the child in messages and its log file.
	Name string
	// Bin is the program; "" = Binary (the settle binary).
	Bin  string
	Args []string
	// Env is added to CleanEnv's environment.
	Env []string
	// Dir is the working directory; "" = the test's.
	Dir string
	// Group makes the child lead a process group of its own, for a child
	// that starts the program under test (`go run`): signals go to the
	// child's children, and cleanup kills the whole group. (A terminal's
	// Ctrl-C reaches both, and the go command then exits 1 of its own
	// accord whatever the program did; signalled alone, the program's exit
	// code is go run's.)
	Group bool
	// NoLogOnFailure keeps the log out of a failed test's output, for
	// tests that start many children and print what they need of Log.
	NoLogOnFailure bool
}

// Process is one running child (child.Process: its signals, stops and
// waits), with its stdout kept for the test.
type Process struct {
	*child.Process
	stdout testnet.SyncBuffer // stdout alone, for tests that read it
}

// Start starts the child described by o, with CleanEnv's environment and
// its log in the test's temporary directory. It is killed at cleanup if it
// is still running, and its log is printed then if the test failed (unless
// o.NoLogOnFailure).
func Start(t testing.TB, o Options) *Process {
	t.Helper()
	if o.Bin == "" {
		o.Bin = Binary(t)
	}
	p := &Process{}
	c, err := child.Start(child.Options{Name: o.Name, Bin: o.Bin, Args: o.Args, Env: CleanEnv(o.Env...), Dir: o.Dir,
		LogPath: filepath.Join(t.TempDir(), strings.ReplaceAll(o.Name, "/", "_")+".log"), Stdout: &p.stdout, Group: o.Group})
	if err != nil {
		t.Fatal(err)
	}
	p.Process = c
	t.Cleanup(func() {
		if !p.Exited() {
			p.Kill()
		}
		if t.Failed() && !o.NoLogOnFailure {
			log, cut := p.Tail(failureLogBytesMax)
			if cut {
				log = "...\n" + log
			}
			t.Logf("---- log of %s %s (pid %d) ----\n%s", filepath.Base(o.Bin), o.Name, p.Pid(), log)
		}
	})
	return p
}

// Stdout returns what the child printed on stdout so far.
func (p *Process) Stdout() string { return p.stdout.String() }

// Log returns the end of the child's combined stdout and stderr so far,
// at most LogTailBytesMax.
func (p *Process) Log() string {
	log, _ := p.Tail(LogTailBytesMax)
	return log
}
