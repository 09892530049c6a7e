package proctest

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/settlehq/settle/internal/layout"
)

// TestProcessLifecycle runs sh as the child: its output reaches Stdout and
// Log, exit codes come back as they are, SIGTERM and SIGKILL end a child
// that would run for a minute, and the environment is clean.
func TestProcessLifecycle(t *testing.T) {
	t.Setenv("SETTLE_PROCTEST_LEAK", "leaked") // not inherited: CleanEnv drops SETTLE_*

	p := Start(t, Options{Name: "echo", Bin: "/bin/sh", Env: []string{"EXTRA=given"},
		Args: []string{"-c", `echo "out $EXTRA ${SETTLE_PROCTEST_LEAK:-clean}"; echo err >&2; exit 3`}})
	if code := p.ExitCode(10 * time.Second); code != 3 {
		t.Fatalf("exit code %d, want 3; log:\n%s", code, p.Log())
	}
	if got := p.Stdout(); got != "out given clean\n" {
		t.Errorf("stdout %q, want %q", got, "out given clean\n")
	}
	if log := p.Log(); !strings.Contains(log, "out given clean\n") || !strings.Contains(log, "err\n") {
		t.Errorf("log %q: want stdout and stderr", log)
	}
	if !p.Exited() || p.Err() == nil {
		t.Errorf("exited %v, err %v: want exited with an error", p.Exited(), p.Err())
	}

	long := []string{"-c", "exec sleep 60"}
	term := Start(t, Options{Name: "term", Bin: "/bin/sh", Args: long})
	if term.WaitExit(50 * time.Millisecond) {
		t.Fatal("a sleeping child exited on its own")
	}
	if code := term.ExitCode(0); code != -2 {
		t.Errorf("exit code of a running child: %d, want -2", code)
	}
	if err := term.Stop(10 * time.Second); err == nil || !term.Exited() {
		t.Errorf("Stop of sh (which SIGTERM kills): %v, exited %v; want a signal error", err, term.Exited())
	}
	kill := Start(t, Options{Name: "kill", Bin: "/bin/sh", Args: long})
	if err := kill.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	kill.Kill() // SIGCONT first: a stopped child dies too
	if code := kill.ExitCode(0); code != -1 {
		t.Errorf("exit code after Kill: %d, want -1 (killed by a signal)", code)
	}
}

func TestCleanEnv(t *testing.T) {
	t.Setenv("SETTLE_X", "1")
	t.Setenv("DATABASE_URL", "postgres://elsewhere")
	t.Setenv("KAFKA_BROKERS", "elsewhere:9092")
	t.Setenv("PROCTEST_KEPT", "yes")
	env := strings.Join(CleanEnv("SETTLE_Y=2"), "\n") + "\n"
	for _, gone := range []string{"SETTLE_X=", "DATABASE_URL=", "KAFKA_BROKERS="} {
		if strings.Contains(env, gone) {
			t.Errorf("CleanEnv kept %s", gone)
		}
	}
	for _, kept := range []string{"PROCTEST_KEPT=yes\n", "SETTLE_Y=2\n"} {
		if !strings.Contains(env, kept) {
			t.Errorf("CleanEnv lost %q", kept)
		}
	}
}

// failedTB is a test that has failed: it keeps what is logged and runs
// its cleanups when told.
type failedTB struct {
	*testing.T
	logged   strings.Builder
	cleanups []func()
}

func (f *failedTB) Failed() bool                    { return true }
func (f *failedTB) Cleanup(fn func())               { f.cleanups = append(f.cleanups, fn) }
func (f *failedTB) Logf(format string, args ...any) { fmt.Fprintf(&f.logged, format, args...) }
func (f *failedTB) cleanup() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// TestFailedTestShowsTheLog: at cleanup of a failed test a child still
// running is killed and the end of its log is printed, marked as cut when
// longer than that; NoLogOnFailure prints nothing.
func TestFailedTestShowsTheLog(t *testing.T) {
	t.Parallel()
	script := `i=0; while [ $i -lt 3000 ]; do echo "line $i of the log"; i=$((i+1)); done; echo last-line; exec sleep 60`
	for _, quiet := range []bool{false, true} {
		f := &failedTB{T: t}
		p := Start(f, Options{Name: "talker", Bin: "/bin/sh", Args: []string{"-c", script}, NoLogOnFailure: quiet})
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(p.Log(), "last-line") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		f.cleanup()
		if !p.Exited() {
			t.Fatal("cleanup left the child running")
		}
		got := f.logged.String()
		if quiet {
			if got != "" {
				t.Errorf("NoLogOnFailure: logged %.200q", got)
			}
			continue
		}
		if !strings.Contains(got, "---- log of sh talker (pid ") || !strings.Contains(got, "...\n") ||
			!strings.Contains(got, "last-line") || strings.Contains(got, "line 0 of the log") {
			t.Errorf("failed test's log: want the marked, cut end of the log; got %d bytes:\n%.300s", len(got), got)
		}
	}
}

// TestNotInProduction: the settle binary does not link this package, nor
// the other test-support packages.
func TestNotInProduction(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/settlehq/settle/cmd/settle").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/settlehq/settle/settle") {
		t.Fatalf("go list -deps of cmd/settle does not list the settle package: %q", deps)
	}
	for pkg := range layout.TestSupport {
		if slices.Contains(deps, "github.com/settlehq/settle/"+pkg) {
			t.Errorf("cmd/settle imports the test-support package %s", pkg)
		}
	}
}
