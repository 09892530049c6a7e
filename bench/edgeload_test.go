package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/cespare/xxhash/v2"
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
	k := l.pick(rand.New(rand.NewPCG(1, 1)))
	for i := range 3 {
		if !l.send(context.Background(), conn, k) {
			t.Fatalf("request %d not answered 200: %v", i+1, l.problems)
		}
	}
	if len(l.problems) > 0 || accepted.Load() != 3 {
		t.Errorf("problems %v, %d connections; want none and 3", l.problems, accepted.Load())
	}
}

// TestAnswerCheck: a key whose stored answer is the one its clients were
// given passes; a key stored with other bytes, a key not stored and a key
// never answered do not.
func TestAnswerCheck(t *testing.T) {
	l, err := newEdgeLoad("http://127.0.0.1:1", "acme", "token")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 4 {
		l.pick(rng)
	}
	for i := range 3 {
		l.keys[i].first, l.keys[i].answered = xxhash.Sum64String(fmt.Sprintf(`{"n":%d}`, i+1)), true
	}
	a := newAnswerCheck(l.keys)
	a.add("k-1", []byte(`{"n":1}`))
	a.add("k-2", []byte(`{"n":20}`))
	a.add("k-4", []byte(`{"n":4}`))
	if got, want := a.bad(), []string{"k-2", "k-3", "k-4"}; !slices.Equal(got, want) || a.stored != 3 {
		t.Errorf("bad %v, stored %d; want %v and 3", got, a.stored, want)
	}
}
