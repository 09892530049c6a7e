package service

import (
	"net"
	"runtime"
	"strings"
)

// LoopbackHost reports whether host (an address or a name, no port) is this
// machine's loopback. Names other than localhost resolve to who knows what:
// not loopback.
func LoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// lanesMaxFor is the consumer's default LanesMax for a PostgreSQL at host.
// A PostgreSQL on this machine (a Unix socket or a loopback address) runs on
// the service's cores: more settling transactions at once than there are
// cores cost both more CPU per record for no more records per second, so the
// lanes are capped at the cores Go may use (at least two, so that one
// transaction's round trips overlap another's work). A PostgreSQL elsewhere
// has cores of its own, and a lane per partition keeps its transactions
// coming: 0, no cap. BENCHMARKS.md, "Other figures", has the measurements.
func lanesMaxFor(host string) int {
	if strings.HasPrefix(host, "/") || LoopbackHost(host) {
		return max(2, runtime.GOMAXPROCS(0))
	}
	return 0
}
