package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
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
	c, err := newCluster(opts, binDir, ra)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok && c.removeDir {
			_ = os.RemoveAll(c.dir)
		}
	}()
	if err := c.checkDir(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err != nil {
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
	}
	if err := c.firstStart(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// newCluster picks the cluster's port (a free one unless opts names it) and
// makes its directory (a new temporary one unless opts names it).
func newCluster(opts Options, binDir string, ra *runAs) (*Cluster, error) {
	c := &Cluster{binDir: binDir, port: opts.Port, listen: opts.Listen, runAs: ra}
	var err error
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
	return c, nil
}

// checkDir checks that the socket path fits and, when the server runs as
// another user, gives that user the directory.
func (c *Cluster) checkDir() error {
	// The socket path is limited by sockaddr_un.sun_path; postgres would
	// fail with a less obvious message, so say which path was too long.
	if sock := c.socketPath(); len(sock) > maxSocketPath() {
		return fmt.Errorf("pgcluster: unix socket path %s is longer than %d bytes; use a shorter Options.Dir", sock, maxSocketPath())
	}
	if ra := c.runAs; ra != nil {
		// initdb creates dir/data and postgres creates its socket and
		// lock files in dir, both as the postgres user.
		if err := os.Chown(c.dir, int(ra.uid), int(ra.gid)); err != nil {
			return fmt.Errorf("pgcluster: chown %s to %s: %w", c.dir, ra.name, err)
		}
	}
	return nil
}

// firstStart starts the server for Start.
func (c *Cluster) firstStart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for attempt := 0; ; attempt++ {
		err := c.startLocked(ctx)
		var se *startError
		// Another process can grab an auto-picked port between freePort
		// closing it and postgres binding it; pick again rather than fail
		// a test on a race it did not cause. Only on the first start:
		// Restart and StartAgain promise the same port.
		if err != nil && c.autoPort && c.listen != "" && attempt < 3 &&
			errors.As(err, &se) && strings.Contains(se.logTail, "could not bind") {
			if c.port, err = freePort(); err != nil {
				return err
			}
			continue
		}
		return err
	}
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

// WithDatabase returns server, a connection URL, naming database name
// instead of its own: the same host, user and parameters. The bench and the
// tests reach the databases they create on a server this way.
func WithDatabase(server, name string) string {
	q := strings.IndexByte(server, '?') // parameters may hold a socket path's slashes
	if q < 0 {
		q = len(server)
	}
	i := strings.LastIndex(server[:q], "/")
	return server[:i+1] + name + server[q:]
}
