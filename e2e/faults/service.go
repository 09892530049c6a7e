package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/settlehq/settle/internal/crashpoint"
	"github.com/settlehq/settle/internal/proctest"
)

// Binary returns the path of the settle binary the services run: built
// once per test process (proctest.Binary), the production one, so crash
// points are armed only through the environment of the child.
// SETTLE_FAULTS_BIN names a binary built beforehand instead (e.g. from a
// clean checkout).
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SETTLE_FAULTS_BIN"); p != "" {
		return p
	}
	return proctest.Binary(t)
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
	// fast. 0 = 1.5s.
	SessionTimeout time.Duration
	// Env is appended to the child's environment.
	Env []string
}

// Service is one running `settle run` child process.
type Service struct {
	*proctest.Process
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
	env := opts.Env
	if opts.CrashAt != "" {
		env = append([]string{crashpoint.EnvVar + "=" + opts.CrashAt}, env...)
	}
	// The tests print the log tails they need: one test may start hundreds
	// of services.
	return &Service{proctest.Start(t, proctest.Options{Name: name, Bin: Binary(t), Env: env, NoLogOnFailure: true,
		Args: []string{"run",
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
		}})}
}

// CrashedAt returns the crash point the child died at ("" when it did not
// die at one), after it exited.
func (s *Service) CrashedAt() string {
	var ee *exec.ExitError
	if !errors.As(s.Err(), &ee) {
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
