package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// broker is the Kafka-protocol broker of the end-to-end runs.
type broker struct {
	addrs []string
	close func()
}

// startBroker starts kfake in this process, or as the child process argv
// (which must run ServeBroker) when argv is set.
func startBroker(ctx context.Context, argv []string) (*broker, error) {
	if len(argv) == 0 {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return nil, fmt.Errorf("start in-process broker: %w", err)
		}
		return &broker{addrs: c.ListenAddrs(), close: c.Close}, nil
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start broker process: %w", err)
	}
	stop := func() {
		// The child exits when its stdin closes; it is stopped at the end
		// of a run, so how it exits (or that the pipe was gone) is no
		// result of the run.
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill() // Wait above then returns
			<-done
		}
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout) // drained so the child never blocks on a full pipe
	}()
	select {
	case l, ok := <-line:
		if !ok || !strings.HasPrefix(l, "brokers ") {
			stop()
			return nil, fmt.Errorf("broker process did not report its address (got %q)", l)
		}
		return &broker{addrs: strings.Split(strings.TrimPrefix(l, "brokers "), ","), close: stop}, nil
	case <-time.After(30 * time.Second):
		stop()
		return nil, fmt.Errorf("broker process did not start within 30s")
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
