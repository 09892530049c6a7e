// Package loopback finds free loopback addresses for what a process starts
// beside it: a test's child process, the bench's service, a private
// PostgreSQL cluster. It is the one place a free port is picked.
package loopback

import (
	"fmt"
	"net"
	"sync"
)

// FreeAddr returns a loopback address (127.0.0.1:port) nothing listens on
// right now, and that no earlier call of this process returned: the kernel
// may hand a port it just freed out again, so two calls in a row (an admin
// and an API address for one child process) could get the same one.
// Another process may take it before the caller does; callers that cannot
// live with that retry.
func FreeAddr() (string, error) {
	given.Lock()
	defer given.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("find a free loopback port: %w", err)
		}
		addr := ln.Addr().String()
		if err := ln.Close(); err != nil {
			return "", fmt.Errorf("find a free loopback port: close %s: %w", addr, err)
		}
		if !given.addrs[addr] {
			given.addrs[addr] = true
			return addr, nil
		}
	}
	return "", fmt.Errorf("find a free loopback port: the kernel gave 100 ports this process had already handed out")
}

// FreePort is FreeAddr's port.
func FreePort() (int, error) {
	addr, err := FreeAddr()
	if err != nil {
		return 0, err
	}
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	return a.Port, nil
}

// given holds the addresses FreeAddr has returned.
var given = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}
