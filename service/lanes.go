package service

import (
	"net"
	"runtime"
	"strings"
)

// lanesMaxFor is the consumer's default LanesMax for a PostgreSQL at host.
// A PostgreSQL on this machine (a Unix socket or a loopback address) runs on
// the service's cores: more settling transactions at once than there are
// cores cost both more CPU per record for no more records per second, so
// the lanes are capped at the cores Go may use (at least two, so that one
// transaction's round trips overlap another's work). A PostgreSQL elsewhere has cores of its own, and a lane
// per partition keeps its transactions coming: 0, no cap. BENCHMARKS.md,
// "Lanes", has the measurements.
func lanesMaxFor(host string) int {
	if strings.HasPrefix(host, "/") || host == "localhost" {
		return max(2, runtime.GOMAXPROCS(0))
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return max(2, runtime.GOMAXPROCS(0))
	}
	return 0
}
