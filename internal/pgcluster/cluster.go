package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// startTimeout bounds how long Start, Restart and StartAgain wait for
	// the server to accept connections, on top of the caller's context: a
	// server that is not up within a minute is broken (typically crash
	// recovery after Kill takes well under a second), and waiting forever
	// would hang `settle dev` or a test with no explanation.
	startTimeout = 60 * time.Second

	// fastStopTimeout is how long a fast shutdown may take before we
	// escalate to an immediate one and finally SIGKILL, so Stop always
	// returns and never leaks a postmaster.
	fastStopTimeout = 30 * time.Second

	// logTailBytes is how much of the server log goes into start errors:
	// enough for the FATAL line and its context, little enough to read.
	logTailBytes = 4096

	// superuser is the bootstrap role initdb creates (-U) and DSN uses. It
	// is fixed rather than the OS user so DSNs look the same for root in
	// CI and for developers.
	superuser = "postgres"
)

// Options configures Start. The zero value is what tests usually want: a new
// temporary directory, a free port, and a unix socket only.
type Options struct {
	// Dir holds the cluster: the data directory (Dir/data), the server log
	// (Dir/postgres.log) and the unix socket. "" creates a new temporary
	// directory that Stop removes. A non-empty Dir is created if missing,
	// is never removed, and an existing cluster in it is reused rather than
	// re-initialised, which lets `settle dev` keep its data across runs.
	// When running as root, the postgres user must be able to traverse
	// every parent of Dir (t.TempDir() is root-only, so do not use it).
	Dir string

	// Port is the TCP port and the number in the socket file name
	// (.s.PGSQL.<Port>). 0 picks a free loopback port, which is what
	// parallel tests need.
	Port int

	// Listen is the server's listen_addresses. "" listens on the unix
	// socket in Dir only; "127.0.0.1" also accepts TCP on loopback, for
	// clients that cannot use unix sockets. DSN connects over TCP when
	// Listen is set.
	Listen string
}

// Cluster is a running (or stopped) private PostgreSQL cluster. Its methods
// are safe for concurrent use; they serialise on an internal lock.
type Cluster struct {
	binDir    string
	dir       string
	dataDir   string
	logPath   string
	port      int
	listen    string
	removeDir bool   // we created dir, so Stop removes it
	runAs     *runAs // nil: run as the current user
	autoPort  bool   // port was picked by us, so a bind race may retry

	mu      sync.Mutex
	proc    *process // the running postmaster; nil when not running
	removed bool     // Stop removed dir; the cluster is gone for good
}

// process is one postmaster we started. Waiting for it in a goroutine reaps
// it as soon as it exits, so a Killed postmaster never lingers as a zombie
// (a zombie's PID still "exists", and the next postmaster would refuse to
// start because postmaster.pid names a live process).
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd.Wait returned
}

// runAs is the unprivileged user the server programs run as when we are root.
type runAs struct {
	name     string
	uid, gid uint32
}

// Start creates (or reuses, see Options.Dir) a cluster and starts its
// server, returning once it accepts connections. The caller owns the result
// and must call Stop, even if the context is cancelled later: the context
// only bounds the startup.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := platformSupported(); err != nil {
		return nil, err
	}
	binDir, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	ra, err := serverUser()
	if err != nil {
		return nil, err
	}

	c := &Cluster{binDir: binDir, port: opts.Port, listen: opts.Listen, runAs: ra}
	if c.port == 0 {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
		c.autoPort = true
	}
	if opts.Dir == "" {
		c.dir, err = os.MkdirTemp(tempBase(), "pgcluster-")
		if err != nil {
			return nil, fmt.Errorf("pgcluster: create temp dir: %w", err)
		}
		c.removeDir = true
	} else {
		if c.dir, err = filepath.Abs(opts.Dir); err != nil {
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
		if err := os.MkdirAll(c.dir, 0o700); err != nil {
			return nil, fmt.Errorf("pgcluster: create %s: %w", c.dir, err)
		}
	}
	c.dataDir = filepath.Join(c.dir, "data")
	c.logPath = filepath.Join(c.dir, "postgres.log")

	ok := false
	defer func() {
		if !ok && c.removeDir {
			_ = os.RemoveAll(c.dir)
		}
	}()

	// The socket path is limited by sockaddr_un.sun_path; postgres would
	// fail with a less obvious message, so say which path was too long.
	if sock := c.socketPath(); len(sock) > maxSocketPath() {
		return nil, fmt.Errorf("pgcluster: unix socket path %s is longer than %d bytes; use a shorter Options.Dir", sock, maxSocketPath())
	}
	if ra != nil {
		// initdb creates dir/data and postgres creates its socket and
		// lock files in dir, both as the postgres user.
		if err := os.Chown(c.dir, int(ra.uid), int(ra.gid)); err != nil {
			return nil, fmt.Errorf("pgcluster: chown %s to %s: %w", c.dir, ra.name, err)
		}
	}

	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err != nil {
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	for attempt := 0; ; attempt++ {
		err = c.startLocked(ctx)
		var se *startError
		// Another process can grab an auto-picked port between freePort
		// closing it and postgres binding it; pick again rather than fail
		// a test on a race it did not cause. Only on the first start:
		// Restart and StartAgain promise the same port.
		if err != nil && c.autoPort && c.listen != "" && attempt < 3 &&
			errors.As(err, &se) && strings.Contains(se.logTail, "could not bind") {
			if c.port, err = freePort(); err != nil {
				return nil, err
			}
			continue
		}
		break
	}
	if err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// DSN returns a connection URL for database dbname ("" means the default,
// "postgres") that pgx and libpq accept. It uses the unix socket unless
// Options.Listen was set, in which case it uses TCP loopback, so the TCP
// path is exercised when that is what the caller asked for.
func (c *Cluster) DSN(dbname string) string {
	port := strconv.Itoa(c.port)
	if c.listen != "" {
		return "postgres://" + superuser + "@" + net.JoinHostPort(tcpHost(c.listen), port) +
			"/" + url.PathEscape(dbname) + "?sslmode=disable"
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(superuser),
		Path:     "/" + dbname,
		RawQuery: url.Values{"host": {c.dir}, "port": {port}, "sslmode": {"disable"}}.Encode(),
	}
	return u.String()
}

// Dir returns the cluster directory (data directory, log and socket live
// here).
func (c *Cluster) Dir() string { return c.dir }

// Port returns the server's port. It never changes for the life of the
// Cluster, so DSNs taken before a Restart stay valid.
func (c *Cluster) Port() int { return c.port }

// LogFile returns the path of the server log, which start errors quote the
// tail of and which is worth printing when a test against the cluster fails.
func (c *Cluster) LogFile() string { return c.logPath }

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

// serverUser decides who runs the server programs: nobody special unless we
// are root, because initdb and postgres refuse to run as root.
func serverUser() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root, and PostgreSQL refuses to run as root, "+
			"but there is no %q system user to run it as (%v); installing the postgresql package creates one, "+
			"or run as a non-root user", "postgres", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgcluster: user postgres has non-numeric uid/gid %q/%q", u.Uid, u.Gid)
	}
	return &runAs{name: u.Username, uid: uint32(uid), gid: uint32(gid)}, nil
}

// freePort asks the kernel for an unused loopback port. The port is free
// only at the moment we close the listener; Start retries on the rare race.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: pick a free port: %w", err)
	}
	a, ok := l.Addr().(*net.TCPAddr)
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("pgcluster: pick a free port: close %s: %w", l.Addr(), err)
	}
	if !ok {
		return 0, fmt.Errorf("pgcluster: pick a free port: %s is not a TCP address", l.Addr())
	}
	return a.Port, nil
}

// tempBase is where Start creates temporary cluster directories: the usual
// temp dir, unless it is so long (macOS's /var/folders/...) that the socket
// path would not fit in sun_path.
func tempBase() string {
	base := os.TempDir()
	if len(base)+len("/pgcluster-0123456789/.s.PGSQL.65535") > maxSocketPath() {
		return "/tmp"
	}
	return base
}

func (c *Cluster) socketPath() string {
	return filepath.Join(c.dir, ".s.PGSQL."+strconv.Itoa(c.port))
}

// maxSocketPath is sizeof(sun_path) minus the terminating NUL.
func maxSocketPath() int {
	if runtime.GOOS == "linux" {
		return 107
	}
	return 103
}

// tcpHost turns listen_addresses into an address a client can dial: the
// first entry, with wildcards replaced by loopback.
func tcpHost(listen string) string {
	h := strings.TrimSpace(strings.Split(listen, ",")[0])
	switch h {
	case "", "*", "0.0.0.0":
		return "127.0.0.1"
	case "::":
		return "::1"
	}
	return h
}
