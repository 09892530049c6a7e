// Package testnet has loopback network helpers for tests: a free address
// to listen on, and a TCP proxy that can cut a dependency away (a database
// or broker outage) and bring it back. Test support only: production code
// must never import it.
package testnet

import (
	"io"
	"net"
	"sync"
	"testing"
)

// FreeAddr returns a loopback address nothing listens on right now. (Another
// process may take it before the caller does; tests live with that.)
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Proxy forwards TCP connections from Addr to a target until Cut: Cut
// closes every connection and refuses new ones; Restore accepts again.
// Its goroutines end at the test's cleanup.
type Proxy struct {
	addr  string
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.down {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			wg.Go(func() { io.Copy(up, c); up.Close() })
			wg.Go(func() { io.Copy(c, up); c.Close() })
		}
	})
	return p
}

// Addr is the address to connect to instead of the target.
func (p *Proxy) Addr() string { return p.addr }

// Cut closes every forwarded connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Restore accepts connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}
