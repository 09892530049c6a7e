package service

import (
	"runtime"
	"testing"
)

// TestLanesMaxFor: the consumer's lanes are capped at the cores when
// PostgreSQL runs on this machine, and not capped when it runs elsewhere.
func TestLanesMaxFor(t *testing.T) {
	local := max(2, runtime.GOMAXPROCS(0))
	for host, want := range map[string]int{
		"127.0.0.1":            local,
		"127.0.0.2":            local,
		"::1":                  local,
		"localhost":            local,
		"LocalHost":            local,
		"/var/run/postgresql":  local,
		"db.internal":          0,
		"192.0.2.5":            0,
		"2001:db8::1":          0,
		"postgres.example.com": 0,
	} {
		if got := lanesMaxFor(host); got != want {
			t.Errorf("lanesMaxFor(%q) = %d, want %d", host, got, want)
		}
	}
}
