package pgcluster

// Starting and stopping the postmaster on the cluster's data directory:
// initdb, start and wait until it accepts connections, fast, immediate and
// killing stops, and the server log that start errors quote.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Stop shuts the server down (fast mode: sessions are terminated, no crash
// recovery needed afterwards) and, if Start created the directory, removes
// it. It is idempotent and also cleans up after Kill. If the fast shutdown
// hangs, Stop escalates to immediate shutdown and then SIGKILL rather than
// leak a server.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		c.stopLocked(syscall.SIGINT)
	}
	if c.removeDir && !c.removed {
		if err := os.RemoveAll(c.dir); err != nil {
			return fmt.Errorf("pgcluster: remove %s: %w", c.dir, err)
		}
		c.removed = true
	}
	return nil
}

// Restart stops the server and starts it again on the same data directory,
// port and socket, returning once it accepts connections. With immediate,
// the shutdown is PostgreSQL's immediate mode (like `pg_ctl restart -m
// immediate`): no checkpoint, so the next start runs crash recovery, which
// is what tests of reconnect logic want. Otherwise it is a fast shutdown.
// Existing connections are broken either way.
func (c *Cluster) Restart(ctx context.Context, immediate bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return errors.New("pgcluster: Restart: server is not running")
	}
	sig := syscall.SIGINT // fast shutdown
	if immediate {
		sig = syscall.SIGQUIT // immediate shutdown
	}
	c.stopLocked(sig)
	return c.startLocked(ctx)
}

// Kill crashes the server: SIGKILL to the postmaster, which gets no chance to
// clean up, exactly like the OOM killer. Its backends notice the dead
// postmaster and exit on their own shortly after. Use StartAgain to bring
// the cluster back (it runs crash recovery); Stop still cleans up.
func (c *Cluster) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return errors.New("pgcluster: Kill: server is not running")
	}
	_ = c.proc.cmd.Process.Signal(syscall.SIGKILL)
	<-c.proc.done
	c.proc = nil
	return nil
}

// StartAgain starts the server on the existing data directory, port and
// socket after Kill (or after Stop on a caller-provided Options.Dir, which
// Stop does not remove). It returns once the server accepts connections.
func (c *Cluster) StartAgain(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.removed:
		return errors.New("pgcluster: StartAgain: cluster was stopped and its directory removed")
	case c.proc != nil:
		return errors.New("pgcluster: StartAgain: server is already running")
	}
	return c.startLocked(ctx)
}

// initdb creates the data directory. Trust auth because the cluster is only
// reachable through its own socket directory or loopback and holds
// throwaway data; --no-sync because durability of a throwaway cluster is
// worthless and syncing takes most of initdb's time; --locale=C because
// minimal containers often have a LANG that names an uninstalled locale,
// which makes initdb fail.
func (c *Cluster) initdb(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "initdb"),
		"-D", c.dataDir,
		"-U", superuser,
		"--auth=trust",
		"--encoding=UTF8",
		"--locale=C",
		"--no-sync",
	)
	c.prepare(cmd)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		hint := ""
		if c.runAs != nil {
			hint = fmt.Sprintf(" (it runs as user %q, which must be able to reach %s)", c.runAs.name, c.dir)
		}
		return fmt.Errorf("pgcluster: initdb failed: %w%s\n%s", err, hint, tail(out.Bytes()))
	}
	return nil
}

// prepare sets what every server program we run needs: the unprivileged
// user when we are root, and a working directory that user can read
// (postgres complains when it cannot stat its cwd, e.g. /root).
func (c *Cluster) prepare(cmd *exec.Cmd) {
	cmd.Dir = c.dir
	cmd.SysProcAttr = sysProcAttr(c.runAs)
}

// startError is a failed server start, carrying the log so callers (and
// Start's port retry) can see why.
type startError struct {
	msg     string
	logTail string
}

func (e *startError) Error() string {
	return e.msg + "\n--- tail of server log ---\n" + e.logTail
}

// startLocked starts the postmaster and waits until it accepts connections.
// On failure no postmaster is left running. c.mu must be held.
func (c *Cluster) startLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		err := c.startOnce(ctx)
		var se *startError
		// After Kill, the old backends may still be attached to the old
		// shared memory for a moment until they notice the postmaster
		// died; the new postmaster refuses to start until they are gone.
		if err != nil && errors.As(err, &se) && strings.Contains(se.logTail, "pre-existing shared memory block") {
			select {
			case <-time.After(100 * time.Millisecond):
				continue
			case <-ctx.Done():
			}
		}
		return err
	}
}

func (c *Cluster) startOnce(ctx context.Context) error {
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgcluster: open server log: %w", err)
	}
	// Errors quote the log from here on, not earlier runs' messages.
	logStart, _ := logf.Seek(0, io.SeekEnd)
	fmt.Fprintf(logf, "---- pgcluster: starting postgres at %s ----\n", time.Now().Format(time.RFC3339Nano))

	cmd := exec.Command(filepath.Join(c.binDir, "postgres"),
		"-D", c.dataDir,
		"-p", strconv.Itoa(c.port),
		"-c", "listen_addresses="+c.listen,
		"-c", "unix_socket_directories="+c.dir,
		"-c", "max_connections=200",
	)
	c.prepare(cmd)
	// An *os.File is handed to the child directly, so the server keeps
	// logging even while nobody in this process is reading.
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	_ = logf.Close() // this process never wrote to it; the child has its own descriptor
	if err != nil {
		return fmt.Errorf("pgcluster: start postgres: %w", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	c.proc = p

	fail := func(format string, args ...any) error {
		c.stopLocked(syscall.SIGQUIT)
		return &startError{msg: fmt.Sprintf(format, args...), logTail: c.logTailFrom(logStart)}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			c.proc = nil
			return &startError{
				msg:     fmt.Sprintf("pgcluster: postgres exited during startup (%v)", cmd.ProcessState),
				logTail: c.logTailFrom(logStart),
			}
		case <-ctx.Done():
			return fail("pgcluster: postgres did not accept connections in time: %v", ctx.Err())
		case <-tick.C:
		}
		if !c.pidFileReady(cmd.Process.Pid) {
			continue
		}
		// postmaster.pid says "ready"; prove it with a real connection
		// through DSN, which also checks DSN against this server.
		conn, err := pgconn.Connect(ctx, c.DSN(""))
		if err != nil {
			continue
		}
		_ = conn.Close(ctx)
		return nil
	}
}

// pidFileReady reports whether postmaster.pid was written by pid (not left
// over from a killed predecessor) and says the server accepts connections.
// This is the check `pg_ctl start -w` uses: line 1 is the PID, line 8 the
// status.
func (c *Cluster) pidFileReady(pid int) bool {
	b, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return false
	}
	lines := strings.Split(string(b), "\n")
	return len(lines) >= 8 &&
		strings.TrimSpace(lines[0]) == strconv.Itoa(pid) &&
		strings.TrimSpace(lines[7]) == "ready"
}

// stopLocked signals the postmaster to shut down and waits for it to exit,
// escalating to immediate shutdown and then SIGKILL if it takes too long.
// c.mu must be held and c.proc non-nil.
func (c *Cluster) stopLocked(sig syscall.Signal) {
	p := c.proc
	c.proc = nil
	steps := []struct {
		sig     syscall.Signal
		timeout time.Duration
	}{{sig, fastStopTimeout}, {syscall.SIGQUIT, 10 * time.Second}, {syscall.SIGKILL, time.Hour}}
	for _, s := range steps {
		_ = p.cmd.Process.Signal(s.sig)
		select {
		case <-p.done:
			return
		case <-time.After(s.timeout):
		}
	}
}

// logTailFrom returns at most logTailBytes of the server log after offset.
func (c *Cluster) logTailFrom(offset int64) string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", c.logPath, err)
	}
	if offset > 0 && offset <= int64(len(b)) {
		b = b[offset:]
	}
	return tail(b)
}

// tail returns the last logTailBytes of b, starting at a line boundary.
func tail(b []byte) string {
	if len(b) > logTailBytes {
		b = b[len(b)-logTailBytes:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimRight(string(b), "\n")
}
