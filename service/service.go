package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/canary"
	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/relay"
	"github.com/settlehq/settle/relay/outbox"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/retention"
)

// Service is one running instance: build it with New, run it once with
// Run. Ready, Counts, Published and AdminAddr may be called from any
// goroutine.
type Service struct {
	cfg      Config // defaults filled in
	consumer *consumer.Consumer
	relay    *relay.Relay
	sweeper  *sweeper       // nil: no sweeps
	canary   *canary.Canary // nil: no canary
	admin    net.Listener   // nil: no admin listener
	hosts    []string       // the Host values the analysts' page answers
	replayer *kgo.Client    // the analysts' page's dead-letter replays; nil without an admin listener

	release sync.Once
}

// Run builds the service from cfg and runs it until ctx ends; see
// Service.Run.
func Run(ctx context.Context, cfg Config) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// New checks cfg, builds the consumer and the relay, and binds the admin
// listener, so a taken port or a listener beyond loopback without a token
// fails before anything connects. Nothing runs until Run; a Service that
// is never run must be closed. A setting that cannot work is a
// *ConfigError.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, &ConfigError{err}
	}
	cfg = cfg.withDefaults()
	cons, err := consumer.New(cfg.Store, cfg.Consumer)
	if err != nil {
		return nil, &ConfigError{err}
	}
	rel, err := relay.New(outbox.New(cfg.Store), cfg.Relay)
	if err != nil {
		return nil, &ConfigError{err}
	}
	s := &Service{cfg: cfg, consumer: cons, relay: rel}
	if cfg.CanaryEvery > 0 {
		if s.canary, err = newCanary(cfg); err != nil {
			return nil, &ConfigError{err}
		}
	}
	if cfg.SweepInterval > 0 {
		s.sweeper = &sweeper{store: cfg.Store, pruner: retention.New(cfg.Store), orphanAfter: cfg.OrphanAfter, interval: cfg.SweepInterval, log: cfg.Logger,
			pruneEvery: cfg.PruneInterval, pruneDeadLettersAfter: cfg.PruneDeadLettersAfter, pruneCanaryKeep: cfg.PruneCanaryKeep}
	}
	if cfg.AdminAddr == "" {
		return s, nil
	}
	ln, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return nil, fmt.Errorf("admin listener on %s: %w (choose another with --admin-addr)", cfg.AdminAddr, err)
	}
	// The address as written may name a host; this judges what was bound.
	if tcp, ok := ln.Addr().(*net.TCPAddr); len(cfg.Analyst.Tokens) == 0 && !cfg.AdminInsecure && (!ok || !tcp.IP.IsLoopback()) {
		_ = ln.Close() // refused before use; the refusal is the error to report
		return nil, &ConfigError{fmt.Errorf("--admin-addr %s bound %s, beyond loopback, and no analyst has a token: give --admin-token NAME=TOKEN or --admin-insecure", cfg.AdminAddr, ln.Addr())}
	}
	// The analysts' page replays dead letters with a producer of its own,
	// with the service's Kafka settings; it connects on first use.
	replay, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.RequiredAcks(kgo.AllISRAcks())}, cfg.clientOpts()...)...)
	if err != nil {
		_ = ln.Close() // not used yet; the client's error is the one to report
		return nil, &ConfigError{fmt.Errorf("--brokers: %w", err)}
	}
	s.admin, s.hosts, s.replayer = ln, adminHosts(ln.Addr(), cfg.Analyst.Hosts), replay
	return s, nil
}

// Close releases what New bound (the admin listener, the replay producer)
// when Run is never called. Run releases them itself; Close after Run
// does nothing.
func (s *Service) Close() {
	s.release.Do(func() {
		if s.admin != nil {
			_ = s.admin.Close() // never served: nothing to lose
		}
		if s.replayer != nil {
			s.replayer.Close()
		}
	})
}

// AdminAddr is the bound address of the admin listener, nil without one.
func (s *Service) AdminAddr() net.Addr {
	if s.admin == nil {
		return nil
	}
	return s.admin.Addr()
}

// Ready reports whether the consumer is joined and making progress.
func (s *Service) Ready() bool { return s.consumer.Ready() }

// Counts returns the records this instance's consumer settled, by outcome.
func (s *Service) Counts() map[message.Outcome]int64 { return s.consumer.Counts() }

// Published returns how many outbox messages this instance's relay
// published.
func (s *Service) Published() int64 { return s.relay.Published() }

// Run runs the service until ctx ends (or the consumer or the relay fails),
// then stops it in order: the consumer finishes its batch, commits and
// leaves the group; then the relay publishes what is left; then the edge
// and the admin listener close. The whole stop is bounded by
// Config.ShutdownTimeout. Run may be called once.
func (s *Service) Run(ctx context.Context) error {
	defer s.Close()
	if s.admin != nil {
		// Closed last, on every return: a start that fails below must not
		// leave the port bound.
		stopAdmin := s.serveAdmin(ctx)
		defer stopAdmin()
	}
	stopEdge, err := s.startEdge(ctx)
	defer stopEdge()
	if err != nil {
		return err
	}

	if s.cfg.Telemetry != nil {
		unregister, err := s.registerGauges()
		if err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		defer unregister()
	}

	consumerCtx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRelay()
	consuming := part{stop: stopConsumer, done: make(chan error, 1)}
	go func() { consuming.done <- s.consumer.Run(consumerCtx) }()
	relaying := part{stop: stopRelay, done: make(chan error, 1)}
	go func() { relaying.done <- s.relay.Run(relayCtx) }()
	if s.canary != nil {
		// Ends with the consumer: a canary of a stopping service would
		// only report its stop.
		canaryDone := make(chan struct{})
		defer func() { <-canaryDone }()
		go func() { defer close(canaryDone); s.canary.Loop(consumerCtx, s.cfg.CanaryEvery) }()
	}
	if s.sweeper != nil {
		sweepDone := make(chan struct{})
		defer func() { <-sweepDone }()
		go func() { defer close(sweepDone); s.sweeper.run(relayCtx) }()
	}
	runErr := s.awaitStop(ctx, consuming, relaying)
	return s.stopInOrder(runErr, consuming, relaying)
}

// part is the consumer or the relay while Run runs it: stop cancels its
// context, done yields what its Run returned.
type part struct {
	stop context.CancelFunc
	done chan error
}

// serveAdmin serves the admin listener until the returned stop is called.
func (s *Service) serveAdmin(ctx context.Context) (stop func()) {
	log := s.cfg.Logger
	// Bounded like the records API's: whoever reaches the probe port
	// cannot hold connections (and file descriptors) open for ever.
	srv := &http.Server{Handler: s.adminHandler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute} // the CSV export extends its own write deadline page by page
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(s.admin) }()
	log.Info("admin listener up", "addr", s.admin.Addr().String(), "paths", "/livez /readyz /metrics, analysts' page /",
		"analysts", len(s.cfg.Analyst.Tokens), "hosts", strings.Join(s.hosts, ","))
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		if err := <-httpDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("admin listener stopped with an error", "err", err)
		}
	}
}

// awaitStop waits until ctx ends or the consumer or the relay stops on its
// own, and returns the error that stops the service (nil when ctx ended).
// What the part that stopped returned stays in its done for stopInOrder.
func (s *Service) awaitStop(ctx context.Context, consuming, relaying part) error {
	var runErr error
	select {
	case <-ctx.Done():
		s.cfg.Logger.Info("stopping: finishing the batch in hand, committing, leaving the group, flushing the outbox", "timeout", s.cfg.ShutdownTimeout)
	case runErr = <-consuming.done:
		consuming.done <- runErr // read again by stopInOrder
		if runErr == nil {
			runErr = errors.New("consumer stopped on its own")
		}
	case runErr = <-relaying.done:
		relaying.done <- runErr
		if runErr == nil {
			runErr = errors.New("relay stopped on its own")
		}
	}
	return runErr
}

// stopInOrder stops the consumer, then the relay, within
// Config.ShutdownTimeout, and returns runErr or else the first error they
// returned.
func (s *Service) stopInOrder(runErr error, consuming, relaying part) error {
	timeout := s.cfg.ShutdownTimeout
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	consuming.stop()
	var timedOut bool
	select {
	case err := <-consuming.done:
		if err != nil && runErr == nil {
			runErr = err
		}
	case <-deadline.C:
		timedOut = true
	}
	relaying.stop()
	if !timedOut {
		select {
		case err := <-relaying.done:
			if err != nil && runErr == nil {
				runErr = err
			}
		case <-deadline.C:
			timedOut = true
		}
	}
	if timedOut {
		return fmt.Errorf("stop took longer than --shutdown-timeout %s; what was not committed is read again on the next start", timeout)
	}
	return runErr
}
