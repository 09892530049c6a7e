package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/settlehq/settle/internal/crashpoint"
	"github.com/settlehq/settle/internal/testnet"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds cmd/settle once per test process and returns its path. The
// binary is the production one: crash points are armed only through the
// environment of the child. SETTLE_FAULTS_BIN names a binary built
// beforehand instead.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("SETTLE_FAULTS_BIN"); p != "" {
			buildPath = p // a binary built beforehand (e.g. from a clean checkout)
			return
		}
		dir, err := os.MkdirTemp("", "settle-faults-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "settle")
		out, err := exec.Command("go", "build", "-o", buildPath, "github.com/settlehq/settle/cmd/settle").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build cmd/settle: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// Options configure one `settle run` child.
type Options struct {
	DatabaseURL string
	Brokers     []string
	Group       string // "" = "settle"
	// CrashAt arms crash points (SETTLE_CRASH_AT syntax); "" = none.
	CrashAt string
	// BatchRecordsMax and PollRecordsMax are small in tests so that a run
	// passes each crash point many times. 0 = 50 and 400.
	BatchRecordsMax, PollRecordsMax int
	// SessionTimeout of the group: short, so a killed member is noticed
	// fast. 0 = 600ms.
	SessionTimeout time.Duration
	// Env is appended to the child's environment.
	Env []string
}

// Service is one running `settle run` child process.
type Service struct {
	Name   string
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *testnet.SyncBuffer
	err    error
}

// logLevel is the services' log level: warn, or SETTLE_FAULTS_LOG_LEVEL
// (info shows every assignment and rebalance, for chasing a stall).
func logLevel() string {
	if l := os.Getenv("SETTLE_FAULTS_LOG_LEVEL"); l != "" {
		return l
	}
	return "warn"
}

// Start starts `settle run` with opts. The child is killed at cleanup if it
// is still running.
func Start(t testing.TB, name string, opts Options) *Service {
	t.Helper()
	if opts.Group == "" {
		opts.Group = "settle"
	}
	if opts.BatchRecordsMax == 0 {
		opts.BatchRecordsMax = 50
	}
	if opts.PollRecordsMax == 0 {
		opts.PollRecordsMax = 400
	}
	if opts.SessionTimeout == 0 {
		// Short, so a killed member is noticed fast; not so short that a
		// member starved of CPU on a loaded 2-core machine misses it.
		opts.SessionTimeout = 1500 * time.Millisecond
	}
	cmd := exec.Command(Binary(t), "run",
		"--database-url", opts.DatabaseURL,
		"--brokers", strings.Join(opts.Brokers, ","),
		"--group", opts.Group,
		"--admin-addr", "127.0.0.1:0",
		"--session-timeout", opts.SessionTimeout.String(),
		"--rebalance-timeout", RebalanceTimeoutMax.String(),
		"--batch-records-max", fmt.Sprint(opts.BatchRecordsMax),
		"--poll-records-max", fmt.Sprint(opts.PollRecordsMax),
		"--pool-max-conns", "8",
		"--backoff-max", "500ms",
		"--shutdown-timeout", "15s",
		"--log-level", logLevel(),
	)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SETTLE_") && !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "KAFKA_BROKERS=") {
			env = append(env, kv)
		}
	}
	if opts.CrashAt != "" {
		env = append(env, crashpoint.EnvVar+"="+opts.CrashAt)
	}
	cmd.Env = append(env, opts.Env...)
	s := &Service{Name: name, cmd: cmd, done: make(chan struct{}), stderr: &testnet.SyncBuffer{Max: 1 << 20}}
	cmd.Stdout = s.stderr
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// Pid is the child's process id.
func (s *Service) Pid() int { return s.cmd.Process.Pid }

// Signal sends sig to the child.
func (s *Service) Signal(sig syscall.Signal) error { return s.cmd.Process.Signal(sig) }

// Done is closed when the child has exited.
func (s *Service) Done() <-chan struct{} { return s.done }

// Log returns the tail of the child's output.
func (s *Service) Log() string { return s.stderr.String() }

// CrashedAt returns the crash point the child died at ("" when it did not
// die at one), after it exited.
func (s *Service) CrashedAt() string {
	select {
	case <-s.done:
	default:
		return ""
	}
	var ee *exec.ExitError
	if !errors.As(s.err, &ee) {
		return ""
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return ""
	}
	log := s.Log()
	i := strings.LastIndex(log, "crashpoint: ")
	if i < 0 || !strings.Contains(log[i:], ": SIGKILL") {
		return ""
	}
	return strings.Fields(log[i+len("crashpoint: "):])[0]
}

// WaitExit waits up to d for the child to exit and reports whether it did.
func (s *Service) WaitExit(d time.Duration) bool {
	select {
	case <-s.done:
		return true
	case <-time.After(d):
		return false
	}
}

// Kill sends SIGKILL (after SIGCONT, in case it is stopped) and waits.
func (s *Service) Kill() {
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Stop asks the child to stop (SIGTERM) and waits up to d, then kills it.
// It returns the child's exit error (nil: a clean stop).
func (s *Service) Stop(d time.Duration) error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if !s.WaitExit(d) {
		s.Kill()
		return fmt.Errorf("%s did not stop within %s; killed", s.Name, d)
	}
	return s.err
}

// WaitFor polls cond every 50ms until it is true or ctx ends.
func WaitFor(ctx context.Context, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
