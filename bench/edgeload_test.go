package bench

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
)

// TestEdgeConnReconnects: a server that closes each kept-alive connection
// after one answer, without saying so (as one does when the connection
// was idle too long), answers every request of a client on its one
// edgeConn: the request that meets the closed connection goes again on a
// new one, and no problem is recorded. Fails with the resend taken out of
// roundTrip (the second request records "unexpected EOF").
func TestEdgeConnReconnects(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
			}()
		}
	}()
	l, err := newEdgeLoad("http://"+ln.Addr().String(), "acme", "token")
	if err != nil {
		t.Fatal(err)
	}
	conn := &edgeConn{l: l}
	defer conn.close()
	for i := range 3 {
		k := &edgeKey{key: "k", record: "r", body: `{}`}
		if !l.send(context.Background(), conn, k) {
			t.Fatalf("request %d not answered 200: %v", i+1, l.problems)
		}
	}
	if len(l.problems) > 0 || accepted.Load() != 3 {
		t.Errorf("problems %v, %d connections; want none and 3", l.problems, accepted.Load())
	}
}
