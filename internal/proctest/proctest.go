// Package proctest runs a program, as a rule the real settle binary, as a
// child process of a test: it builds cmd/settle once per test process,
// starts the child with a clean environment and its output in a log file,
// signals it, stops it (SIGTERM, then SIGKILL after a bound), kills it,
// waits for it with a bound, kills what is still running at cleanup and
// prints the tail of the log when the test failed.
//
// It is test support, shared by the multi-process tests (e2e/, e2e/faults/):
// production code must never import it.
package proctest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/settlehq/settle/internal/testnet"
)

const (
	// LogTailBytesMax is the most of a child's log that Log returns.
	LogTailBytesMax = 1 << 20
	// failureLogBytesMax is the most of a child's log printed when its
	// test failed: the end, where a failure shows.
	failureLogBytesMax = 16 << 10
	// outputWaitMax bounds how long an exited child's stdout is read on.
	outputWaitMax = 5 * time.Second
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

// Process is one running child.
type Process struct {
	// Name is Options.Name.
	Name string

	cmd     *exec.Cmd
	group   bool
	logPath string             // combined stdout and stderr
	stdout  testnet.SyncBuffer // stdout alone, for tests that read it

	done chan struct{}
	err  error // from Wait, set before done closes
}

// Start starts the child described by o. It is killed at cleanup if it is
// still running, and its log is printed then if the test failed (unless
// o.NoLogOnFailure).
func Start(t testing.TB, o Options) *Process {
	t.Helper()
	if o.Bin == "" {
		o.Bin = Binary(t)
	}
	p := &Process{Name: o.Name, group: o.Group, done: make(chan struct{}),
		logPath: filepath.Join(t.TempDir(), strings.ReplaceAll(o.Name, "/", "_")+".log")}
	f, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(o.Bin, o.Args...)
	p.cmd.Dir = o.Dir
	p.cmd.Env = CleanEnv(o.Env...)
	if o.Group {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	p.cmd.Stderr = f
	p.cmd.Stdout = io.MultiWriter(&p.stdout, f)
	// A grandchild that inherited stdout must not hold Wait (and so Done)
	// open after the child itself exited.
	p.cmd.WaitDelay = outputWaitMax
	if err := p.cmd.Start(); err != nil {
		_ = f.Close() // nothing was written: the start failed
		t.Fatalf("start %s: %v", o.Name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		if err := f.Close(); err != nil && p.err == nil {
			p.err = fmt.Errorf("close the log of %s: %w", o.Name, err)
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.Exited() {
			p.Kill()
		}
		if t.Failed() && !o.NoLogOnFailure {
			log, cut := p.tail(failureLogBytesMax)
			if cut {
				log = "...\n" + log
			}
			t.Logf("---- log of %s %s (pid %d) ----\n%s", filepath.Base(o.Bin), o.Name, p.Pid(), log)
		}
	})
	return p
}

// Pid is the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the child or, with Options.Group, to the child's
// children (the program go run started).
func (p *Process) Signal(sig syscall.Signal) error {
	if !p.group {
		if err := p.cmd.Process.Signal(sig); err != nil {
			return fmt.Errorf("signal %v to %s: %w", sig, p.Name, err)
		}
		return nil
	}
	// Any thread of the go command may have started the program.
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p.Pid()))
	var children []string
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		children = append(children, strings.Fields(string(b))...)
	}
	if len(children) == 0 {
		return fmt.Errorf("signal %v to the program %s started: it has no child", sig, p.Name)
	}
	var errs []error
	for _, c := range children {
		// A pid that does not parse must not become 0: kill(0, sig)
		// signals this whole process group.
		var child int
		if _, err := fmt.Sscan(c, &child); err != nil {
			errs = append(errs, fmt.Errorf("signal %v to a child of %s: pid %q: %w", sig, p.Name, c, err))
			continue
		}
		if child <= 0 {
			errs = append(errs, fmt.Errorf("signal %v to a child of %s: pid %d is no process", sig, p.Name, child))
			continue
		}
		if err := syscall.Kill(child, sig); err != nil {
			errs = append(errs, fmt.Errorf("signal %v to pid %d, child of %s: %w", sig, child, p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Exited reports whether the child has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WaitExit waits up to d for the child to exit and reports whether it did.
func (p *Process) WaitExit(d time.Duration) bool {
	if p.Exited() {
		return true // also for d <= 0, where the timer would race done
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// Err is how the child exited (nil: code 0) once Done is closed; nil
// before.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// ExitCode waits up to timeout for the child to exit and returns its exit
// code: -1 when a signal killed it, -2 when it did not exit within
// timeout, -3 when waiting for it failed.
func (p *Process) ExitCode(timeout time.Duration) int {
	if !p.WaitExit(timeout) {
		return -2
	}
	if p.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	return -3
}

// Kill sends SIGKILL (after SIGCONT, in case it is stopped) to the child,
// or its whole process group with Options.Group, and waits for it.
func (p *Process) Kill() {
	if p.group {
		_ = syscall.Kill(-p.Pid(), syscall.SIGCONT)
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	} else {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// Stop asks the child to stop (SIGTERM) and waits up to d, then kills it.
// It returns the child's exit error (nil: a clean stop).
func (p *Process) Stop(d time.Duration) error {
	_ = p.Signal(syscall.SIGTERM)
	if !p.WaitExit(d) {
		p.Kill()
		return fmt.Errorf("%s did not stop within %s; killed", p.Name, d)
	}
	return p.err
}

// Stdout returns what the child printed on stdout so far.
func (p *Process) Stdout() string { return p.stdout.String() }

// Log returns the end of the child's combined stdout and stderr so far,
// at most LogTailBytesMax.
func (p *Process) Log() string {
	log, _ := p.tail(LogTailBytesMax)
	return log
}

// tail returns the last n bytes of the log ("" when it cannot be read),
// and whether there was more before them.
func (p *Process) tail(n int64) (string, bool) {
	f, err := os.Open(p.logPath)
	if err != nil {
		return "", false
	}
	defer func() { _ = f.Close() }() // opened only to read
	fi, err := f.Stat()
	if err != nil {
		return "", false
	}
	off := max(0, fi.Size()-n)
	b := make([]byte, fi.Size()-off)
	m, _ := f.ReadAt(b, off)
	return string(b[:m]), off > 0
}
