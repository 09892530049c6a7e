package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/settlehq/settle/internal/child"
	"github.com/settlehq/settle/internal/loopback"
)

// serviceProc is one `settle run` process of an edge run: any settle binary
// (this build, or an older one to compare with) serving the records API on
// loopback.
type serviceProc struct {
	*child.Process
	apiURL string
}

// procArgs is what an edge run asks of `settle run`.
type procArgs struct {
	binary, logPath              string
	databaseURL, brokers, prefix string
	token                        string // tenant=token
	poolConns                    int32
}

// runFlags lists the flags the binary's `run` accepts (its --help-all, or
// --help for releases without it), so the run can leave out what an older
// release does not know.
func runFlags(ctx context.Context, binary string) (map[string]bool, error) {
	var out []byte
	var err error
	for _, h := range []string{"--help-all", "--help"} {
		out, err = exec.CommandContext(ctx, binary, "run", h).CombinedOutput()
		if err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s run --help: %w: %s", binary, err, tail(out, 400))
	}
	flags := map[string]bool{}
	for _, f := range strings.Fields(string(out)) {
		if name, ok := strings.CutPrefix(f, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			flags[strings.TrimRight(name, ",")] = true
		}
	}
	return flags, nil
}

// startService starts `settle run` with the API and waits until it serves.
func startService(ctx context.Context, a procArgs) (*serviceProc, error) {
	flags, err := runFlags(ctx, a.binary)
	if err != nil {
		return nil, err
	}
	for _, need := range []string{"database-url", "brokers", "api-token", "api-addr", "admin-addr", "topic"} {
		if !flags[need] {
			return nil, fmt.Errorf("%s run has no --%s: it cannot serve the records API this bench drives", a.binary, need)
		}
	}
	apiAddr, err := loopback.FreeAddr()
	if err != nil {
		return nil, err
	}
	adminAddr, err := loopback.FreeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"run", "--database-url", a.databaseURL, "--brokers", a.brokers,
		"--topic", a.prefix + "usage", "--api-token", a.token, "--api-addr", apiAddr, "--admin-addr", adminAddr}
	optional := [][2]string{
		{"owner-url", a.databaseURL},
		{"results-topic", a.prefix + "results"}, {"settlements-topic", a.prefix + "settlements"},
		{"dlq-topic", a.prefix + "dlq"}, {"group", a.prefix + "group"},
		{"pool-max-conns", strconv.Itoa(int(a.poolConns))}, {"log-level", "warn"},
	}
	for _, o := range optional {
		if flags[o[0]] {
			args = append(args, "--"+o[0], o[1])
		}
	}
	c, err := child.Start(child.Options{Name: "settle run", Bin: a.binary, Args: args, LogPath: a.logPath})
	if err != nil {
		return nil, err
	}
	p := &serviceProc{Process: c, apiURL: "http://" + apiAddr}
	if err := p.waitReady(ctx, "http://"+adminAddr+"/readyz", 60*time.Second); err != nil {
		_ = p.stop() // the start failed: that error is the one to report
		return nil, fmt.Errorf("%w (log %s)", err, a.logPath)
	}
	return p, nil
}

// waitReady polls url until it answers 200, the process exits or timeout.
func (p *serviceProc) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	cl := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		if resp, err := cl.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.Done():
			return fmt.Errorf("settle run exited before it was ready: %w", p.Err())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("settle run not ready within %s", timeout)
}

// cpu is the CPU time the process has used so far (Linux /proc).
func (p *serviceProc) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100 on Linux
}

// stop ends the process as an operator would (SIGTERM), killing it when it
// does not stop in time. It reports a process that did not exit cleanly.
func (p *serviceProc) stop() error {
	if err := p.Stop(40 * time.Second); err != nil {
		return fmt.Errorf("settle run: %w", err)
	}
	return nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
