// Package e2e proves the pipeline from outside: it builds the real `settle`
// binary once, runs it as separate processes against an in-process
// Kafka-protocol broker (kfake) on loopback and the machine's PostgreSQL,
// kills and stops them, and checks the contract's invariants afterwards.
//
// Tests only. Nothing here is imported by production code.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle/settletest"
)

// settleBin is the binary built once by TestMain.
var settleBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "settle-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	settleBin = filepath.Join(dir, "settle")
	build := exec.Command("go", "build", "-o", settleBin, "github.com/settlehq/settle/cmd/settle")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build settle:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running `settle` process, its output kept in a file (and
// in memory, for tests that read it).
type proc struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	group bool   // signals go to the process group (startProc)
	log   string // path of the combined stdout+stderr

	stdout testnet.SyncBuffer // stdout only

	done chan struct{}
	err  error // from Wait, set before done closes
}

// cleanEnv is the environment minus every setting settle reads, so a test
// sees only what it passes (a developer's DATABASE_URL must not leak in).
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SETTLE_") || strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "KAFKA_BROKERS=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// startSettle starts `settle args...` with env added to a clean
// environment. The process is killed at cleanup if still running, and its
// log is printed when the test failed.
func startSettle(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	return startProc(t, name, env, "", false, settleBin, args...)
}

// startProc starts bin with args in dir ("" = here) as startSettle does.
// With group (for `go run`), the process leads a process group of its own,
// killed whole at cleanup, and signals go to its children: the program go
// run started. (A terminal's Ctrl-C reaches both, and the go command then
// exits 1 of its own accord whatever the program did; signalled alone, the
// program's exit code is go run's.)
func startProc(t *testing.T, name string, env []string, dir string, group bool, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, done: make(chan struct{}), group: group,
		log: filepath.Join(t.TempDir(), strings.ReplaceAll(name, "/", "_")+".log")}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = cleanEnv(env...)
	if group {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	p.cmd.Stderr = f
	p.cmd.Stdout = io.MultiWriter(&p.stdout, f)
	if err := p.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start settle %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			if p.group {
				syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			} else {
				p.cmd.Process.Kill()
			}
			<-p.done
		}
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			if len(b) > 16<<10 {
				b = append([]byte("...\n"), b[len(b)-16<<10:]...)
			}
			t.Logf("---- log of settle %s (pid %d) ----\n%s", name, p.cmd.Process.Pid, b)
		}
	})
	return p
}

// Stdout returns what the process printed on stdout so far.
func (p *proc) Stdout() string { return p.stdout.String() }

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if p.group {
		// Any thread of the go command may have started the program.
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p.cmd.Process.Pid))
		var children []string
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			children = append(children, strings.Fields(string(b))...)
		}
		if len(children) == 0 {
			p.t.Errorf("signal %v to the program %s started: it has no child", sig, p.name)
			return
		}
		for _, c := range children {
			var child int
			fmt.Sscan(c, &child)
			if err := syscall.Kill(child, sig); err != nil {
				p.t.Errorf("signal %v to pid %d, child of %s: %v", sig, child, p.name, err)
			}
		}
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Errorf("signal %v to settle %s: %v", sig, p.name, err)
	}
}

// wait waits for the process to exit and returns its exit code (-1 when
// killed by a signal, -2 when it did not exit within timeout).
func (p *proc) wait(timeout time.Duration) int {
	select {
	case <-p.done:
	case <-time.After(timeout):
		return -2
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -3
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// emptyDatabase creates an empty database (no schema) on the test server,
// dropped at cleanup, and returns its URL: `settle migrate` is run on it by
// the test, as an operator would.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, settletest.ServerURL())
	if err != nil {
		t.Fatalf("connect to %s: %v (start PostgreSQL, or set SETTLE_TEST_DATABASE_URL)", settletest.ServerURL(), err)
	}
	defer admin.Close(ctx)
	name := fmt.Sprintf("settle_e2e_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropDatabase(name) })
	return settletest.DatabaseURL(name)
}

func dropDatabase(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, settletest.ServerURL())
	if err != nil {
		return
	}
	defer admin.Close(ctx)
	admin.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
}

// migrateDB runs `settle migrate` on url and fails the test unless it
// exits 0.
func migrateDB(t *testing.T, url string) {
	t.Helper()
	p := startSettle(t, "migrate", nil, "migrate", "--owner-url", url)
	if code := p.wait(time.Minute); code != 0 {
		b, _ := os.ReadFile(p.log)
		t.Fatalf("settle migrate: exit %d\n%s", code, b)
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
