// Package testnet has helpers for tests that run services: a free loopback
// address to listen on, a TCP proxy that can cut a dependency away (a
// database or broker outage) and bring it back, and a way to run a
// service's Run loop in the background. Test support only: production code
// must never import it.
package testnet

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/internal/loopback"
)

// Background runs run (a service's Run loop) in a goroutine until the
// returned stop is called or the test ends; stop cancels its context and
// waits up to 20 s for it to return, failing the test if it errs or hangs.
func Background(t testing.TB, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("run did not stop within 20s of its context ending")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// FreeAddr returns a loopback address nothing listens on right now, and
// that no earlier call of this test process returned (loopback.FreeAddr).
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
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
		_ = ln.Close() // ends the accept loop; nothing else to do with its error
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
				_ = c.Close() // refused: the client sees the close
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				_ = c.Close() // refused: the client sees the close
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			// A copy ends when either side closes, which is how Cut
			// works: its error is expected and carries nothing.
			wg.Go(func() { _, _ = io.Copy(up, c); _ = up.Close() })
			wg.Go(func() { _, _ = io.Copy(c, up); _ = c.Close() })
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
		_ = c.Close() // cutting is the point; a connection already gone is cut too
	}
	p.conns = nil
}

// Restore accepts connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// WaitFor polls cond until it holds, failing the test after timeout with
// what it waited for.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// HTTPGet returns the status and body of GET url, within 5 s: status 0 and
// the error's text when there is no answer.
func HTTPGet(url string) (int, string) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }() // read to the end below
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// SyncBuffer collects output written from several goroutines (a running
// service's log) and can be read while it is written. With Max set it keeps
// about the last Max bytes only (a long run logs a lot).
type SyncBuffer struct {
	Max int
	mu  sync.Mutex
	b   bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Max > 0 && s.b.Len() > s.Max {
		tail := append([]byte(nil), s.b.Bytes()[s.b.Len()-s.Max/2:]...)
		s.b.Reset()
		s.b.Write(tail)
	}
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
