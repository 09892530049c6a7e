package loopback

import (
	"net"
	"testing"
)

// TestFreeAddrNeverRepeats: calls in a row return distinct loopback
// addresses a listener can take (the kernel may hand a port it just freed
// out again; an admin and an API address for one child must differ).
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s returned twice", addr)
		}
		seen[addr] = true
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on the free address %s: %v", addr, err)
		}
		_ = ln.Close()
	}
	if p, err := FreePort(); err != nil || p <= 0 {
		t.Fatalf("FreePort: %d, %v", p, err)
	}
}
