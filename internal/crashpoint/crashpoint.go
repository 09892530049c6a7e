// Package crashpoint kills the process at named points of the data path, so
// that tests can prove what survives a crash at exactly that point.
//
// A crash point is armed from the environment when the process starts:
//
//	SETTLE_CRASH_AT=before_commit            first hit of before_commit
//	SETTLE_CRASH_AT=before_commit@5          its 5th hit
//	SETTLE_CRASH_AT=mid_batch%0.2            each hit with probability 0.2
//	SETTLE_CRASH_AT=after_decode@3,mid_batch several points, first to fire wins
//
// An armed point that fires writes one line to stderr
// ("crashpoint: <name> hit <n>: SIGKILL") and sends SIGKILL to its own
// process: no deferred function, no flush, no graceful close runs — what a
// power cut or the OOM killer does. Unarmed (the production case), Hit is
// one atomic pointer load and a nil check.
//
// It owns nothing else. It must never be armed in production: the variable
// is read once, at start, and a process that armed a point says so on
// stderr.
//
// The points (the names Points lists) and where they sit:
//
//	after_decode                       consumer: a poll's records turned into inputs, nothing settled
//	before_commit                      settle: inside the transaction, every row written, before COMMIT
//	after_commit                       settle: right after COMMIT, before the caller sees the results
//	mid_batch                          consumer: one batch of a partition's poll settled and its results
//	                                   published (the next may be settled already), no offset committed
//	after_commit_before_offset_commit  consumer: every batch of the poll committed and published,
//	                                   before the Kafka offset commit
//	after_publish_before_mark          relay: outbox rows acknowledged by the broker, not yet marked
package crashpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// EnvVar is the environment variable that arms crash points.
const EnvVar = "SETTLE_CRASH_AT"

// Points are the crash points compiled into the binary.
var Points = []string{
	"after_decode",
	"before_commit",
	"after_commit",
	"mid_batch",
	"after_commit_before_offset_commit",
	"after_publish_before_mark",
}

// point is one armed crash point.
type point struct {
	at   int64   // fire on this hit (1-based); 0 = use prob
	prob float64 // fire with this probability per hit
	hits atomic.Int64
}

// armed is nil unless the environment armed at least one point.
var armed atomic.Pointer[map[string]*point]

func init() {
	if spec := os.Getenv(EnvVar); spec != "" {
		if err := Arm(spec); err != nil {
			fmt.Fprintf(os.Stderr, "crashpoint: %s=%q ignored: %v\n", EnvVar, spec, err)
			return
		}
		fmt.Fprintf(os.Stderr, "crashpoint: armed %s (this process kills itself there: tests only)\n", spec)
	}
}

// Arm arms the points of spec (the syntax of SETTLE_CRASH_AT), replacing
// any armed before; "" disarms them all. Tests of in-process code can use
// it, but a fired point kills the whole test binary: arm points in child
// processes.
func Arm(spec string) error {
	if spec == "" {
		armed.Store(nil)
		return nil
	}
	m := map[string]*point{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		p := &point{at: 1}
		name := part
		if i := strings.IndexAny(part, "@%"); i >= 0 {
			name = part[:i]
			arg := part[i+1:]
			if part[i] == '@' {
				n, err := strconv.ParseInt(arg, 10, 64)
				if err != nil || n < 1 {
					return fmt.Errorf("%q: the hit count after @ must be a whole number >= 1", part)
				}
				p.at = n
			} else {
				f, err := strconv.ParseFloat(arg, 64)
				if err != nil || f <= 0 || f > 1 {
					return fmt.Errorf("%q: the probability after %% must be in (0, 1]", part)
				}
				p.at, p.prob = 0, f
			}
		}
		if !known(name) {
			return fmt.Errorf("%q: unknown crash point (known: %s)", name, strings.Join(Points, ", "))
		}
		m[name] = p
	}
	armed.Store(&m)
	return nil
}

func known(name string) bool {
	for _, p := range Points {
		if p == name {
			return true
		}
	}
	return false
}

// Hit marks that the process reached the named point; if the point is armed
// and due, the process dies there by SIGKILL and Hit never returns.
func Hit(name string) {
	m := armed.Load()
	if m == nil {
		return
	}
	p := (*m)[name]
	if p == nil {
		return
	}
	n := p.hits.Add(1)
	if (p.at > 0 && n == p.at) || (p.at == 0 && rand.Float64() < p.prob) {
		fmt.Fprintf(os.Stderr, "crashpoint: %s hit %d: SIGKILL\n", name, n)
		kill()
	}
}

// kill sends SIGKILL to this process and waits for it to land.
func kill() {
	self, err := os.FindProcess(os.Getpid())
	if err == nil {
		_ = self.Kill() // SIGKILL on Unix
	}
	select {} // never returns: the signal is on its way
}
