package service

import (
	"net"
	"slices"
	"testing"
)

// TestAdminHosts: the Host values answered on each kind of bound address.
// A wildcard listener answers its interfaces' addresses (loopback among
// them) and localhost, never 0.0.0.0 itself.
func TestAdminHosts(t *testing.T) {
	t.Parallel()
	has := func(hosts []string, h string) bool { return slices.Contains(hosts, h) }
	lo := adminHosts(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, []string{"analysts.example"})
	for _, h := range []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080", "analysts.example"} {
		if !has(lo, h) {
			t.Errorf("loopback listener: %v lacks %s", lo, h)
		}
	}
	wild := adminHosts(&net.TCPAddr{IP: net.IPv4zero, Port: 8080}, nil)
	if !has(wild, "localhost:8080") || !has(wild, "127.0.0.1:8080") || has(wild, "0.0.0.0:8080") {
		t.Errorf("wildcard listener: %v, want localhost:8080 and 127.0.0.1:8080 (lo), not 0.0.0.0:8080", wild)
	}
	one := adminHosts(&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080}, nil)
	if !slices.Equal(one, []string{"10.1.2.3:8080"}) {
		t.Errorf("listener on 10.1.2.3:8080: %v, want only its address", one)
	}
}
