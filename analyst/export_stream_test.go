package analyst_test

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// manyCases settles n pairs of records that conflict: n open cases.
func manyCases(t *testing.T, n int) *settle.Store {
	t.Helper()
	s, _ := manyCasesAt(t, n)
	return s
}

// manyCasesAt is manyCases, with the URL of the database.
func manyCasesAt(t *testing.T, n int) (*settle.Store, string) {
	t.Helper()
	url := settletest.NewDatabase(t)
	s := settletest.NewStoreOn(t, url, settle.Config{})
	at := "2026-11-03T10:00:00Z"
	var ins []message.Input
	ins = append(ins, message.Input{Value: []byte(`{"tenant_id":"acme","account_period":"2026-11","record_id":"g-1","kind":"grant","subject":"cust-1","amount":"1000000","currency":"USD","occurred_at":"` + at + `"}`)})
	for _, amount := range []string{"1", "2"} {
		for i := range n {
			ins = append(ins, message.Input{Value: usageRecord("acme", fmt.Sprintf("u-%d", i), "cust-1", amount, at)})
		}
	}
	for i := range ins {
		ins[i].Topic, ins[i].Offset = "usage", int64(i)
	}
	for len(ins) > 0 {
		b := ins[:min(len(ins), 1000)]
		ins = ins[len(b):]
		if _, err := s.Settle(context.Background(), "g", s.Decode(b)); err != nil {
			t.Fatal(err)
		}
	}
	return s, url
}

// smallBuffers serves with a small socket send buffer, so a slow reader
// holds the handler's writes back as it would over a slow network.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

func exportServer(t *testing.T, cfg analyst.Config) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(analyst.Handler(cfg))
	srv.Listener = smallBuffers{srv.Listener}
	// A write timeout meant for short answers, as the admin listener has:
	// shorter than the slow reader's export.
	srv.Config.WriteTimeout = time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// slowClient reads with a small receive buffer.
var slowClient = &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
	Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}).DialContext}}

// slowRead reads body 4 KiB at a time with a pause between reads.
func slowRead(body io.Reader, pause time.Duration) ([]byte, error) {
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := body.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		time.Sleep(pause)
	}
}

// failingPages fails the queue's reads after the first page, as a
// database that goes away in the middle of an export.
type failingPages struct{ analyst.Store }

func (s failingPages) ListCases(ctx context.Context, f inspect.CaseFilter) (*inspect.CasePage, error) {
	if f.After != "" {
		return nil, errors.New("conflict_case_list: FATAL: terminating connection due to administrator command (SQLSTATE 57P01)")
	}
	return s.Store.ListCases(ctx, f)
}

// TestExportCompletesOrFailsVisibly: the CSV export of 3,000 cases to a
// reader slower than the request timeout (0.5 s here) and the server's
// write timeout (1 s) arrives whole, every row with its 20 fields, because
// the timeout bounds each read, not the export, and the export extends its
// write deadline page by page. When the export's database session is
// terminated (pg_terminate_backend) after its first bytes, or the store
// fails after the first page, the connection is aborted: a Go client's
// read of the body fails and curl exits non-zero, rather than both getting
// a short CSV that ends properly.
func TestExportCompletesOrFailsVisibly(t *testing.T) {
	t.Parallel()
	const cases = 3000
	s, url := manyCasesAt(t, cases)

	t.Run("slow reader", func(t *testing.T) {
		const timeout = 500 * time.Millisecond
		srv := exportServer(t, analyst.Config{Store: analyst.StoreOf(s), RequestTimeout: timeout})
		resp, err := slowClient.Get(srv.URL + "/cases.csv")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%d: %.300s", resp.StatusCode, b)
		}
		start := time.Now()
		body, err := slowRead(resp.Body, 20*time.Millisecond)
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(body), err)
		}
		rows, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
		if err != nil {
			t.Fatalf("the CSV does not parse: %v", err)
		}
		if len(rows) != cases+1 {
			t.Fatalf("%d rows of %d cases (read in %s, longer than the request timeout), ending properly", len(rows)-1, cases, time.Since(start))
		}
		if time.Since(start) < 3*timeout {
			t.Errorf("read in %s: not slower than the request timeout, the test proves nothing", time.Since(start))
		}
	})

	t.Run("connection terminated", func(t *testing.T) {
		// The export reads over a pool of one connection, never pinged
		// before use, so the read after the kill meets the dead session.
		cfg, err := pgxpool.ParseConfig(url + "&application_name=settle-export-test")
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 1
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		srv := exportServer(t, analyst.Config{Store: analyst.StoreOn(s, pool)})
		resp, err := slowClient.Get(srv.URL + "/cases.csv")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		first := make([]byte, 4096)
		if _, err := io.ReadFull(resp.Body, first); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%d, first bytes: %v", resp.StatusCode, err)
		}
		var killed int
		if err := settletest.PoolOn(t, url, 1).QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'settle-export-test'`).Scan(&killed); err != nil || killed != 1 {
			t.Fatalf("terminated %d of the export's sessions: %v", killed, err)
		}
		body, err := slowRead(resp.Body, time.Millisecond)
		if err == nil {
			t.Errorf("the export's session was terminated, and the body ended properly after %d bytes", len(first)+len(body))
		}
	})

	t.Run("failure mid-stream", func(t *testing.T) {
		srv := exportServer(t, analyst.Config{Store: failingPages{analyst.StoreOf(s)}})
		resp, err := http.Get(srv.URL + "/cases.csv")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err == nil {
			t.Errorf("status %d, %d bytes, read error %v: want 200 and a read that fails", resp.StatusCode, len(body), err)
		}
		curl, lookErr := exec.LookPath("curl")
		if lookErr != nil {
			t.Log("no curl: the Go client's failure stands for it")
			return
		}
		out := filepath.Join(t.TempDir(), "cases.csv")
		cmd := exec.Command(curl, "-sS", "-o", out, srv.URL+"/cases.csv")
		msg, err := cmd.CombinedOutput()
		got, _ := os.ReadFile(out)
		if err == nil {
			t.Errorf("curl exited 0 with %d bytes of a failed export", len(got))
		} else {
			t.Logf("curl: %v: %s (%d bytes kept)", err, strings.TrimSpace(string(msg)), len(got))
		}
	})
}
