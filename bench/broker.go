package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/settlehq/settle/internal/child"
)

// broker is the Kafka-protocol broker of the end-to-end runs.
type broker struct {
	addrs []string
	close func()
}

// startBroker starts kfake in this process, or as the child process argv
// (which must run ServeBroker, its output in logPath) when argv is set.
func startBroker(ctx context.Context, argv []string, logPath string) (*broker, error) {
	if len(argv) == 0 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return nil, fmt.Errorf("start in-process broker: %w", err)
		}
		return &broker{addrs: c.ListenAddrs(), close: c.Close}, nil
	}
	// The child serves until its stdin closes: closing the pipe stops it,
	// and so does this process's end, however it comes.
	stdin, feed, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	out, outW := io.Pipe()
	p, err := child.Start(child.Options{Name: "broker", Bin: argv[0], Args: argv[1:], LogPath: logPath, Stdin: stdin, Stdout: outW})
	_ = stdin.Close() // the child has its own copy (or none: the start failed)
	if err != nil {
		_ = feed.Close()
		return nil, err
	}
	stop := func() {
		// Stopped at the end of a run: how it exits is no result of the run.
		_ = feed.Close()
		if !p.WaitExit(5 * time.Second) {
			p.Kill()
		}
		_ = outW.Close()
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, out) // drained so the child never blocks on a full pipe
	}()
	select {
	case l, ok := <-line:
		if !ok || !strings.HasPrefix(l, "brokers ") {
			stop()
			return nil, fmt.Errorf("broker process did not report its address (got %q; log %s)", l, logPath)
		}
		return &broker{addrs: strings.Split(strings.TrimPrefix(l, "brokers "), ","), close: stop}, nil
	case <-time.After(30 * time.Second):
		stop()
		return nil, fmt.Errorf("broker process did not start within 30s (log %s)", logPath)
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}

// ServeBroker runs an in-process kfake broker on loopback, writes
// "brokers HOST:PORT" to out, and serves until stdin closes or ctx ends:
// `settle-bench --broker-only`, the child process of a bench.
func ServeBroker(ctx context.Context, stdin io.Reader, out io.Writer) error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(out, "brokers %s\n", strings.Join(c.ListenAddrs(), ","))
	eof := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, stdin); close(eof) }() // EOF or an error: either way the parent is gone
	select {
	case <-eof:
	case <-ctx.Done():
	}
	return nil
}
