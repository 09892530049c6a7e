package pgcluster

// What the host decides: the user the server runs as, a free port, and the
// unix socket's path and its length limit.

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/settlehq/settle/internal/loopback"
)

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

// freePort is a free loopback port. The port is free only at the moment
// it was checked; Start retries on the rare race.
func freePort() (int, error) {
	p, err := loopback.FreePort()
	if err != nil {
		return 0, fmt.Errorf("pgcluster: %w", err)
	}
	return p, nil
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
