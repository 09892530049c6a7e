package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/relay"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/schema"
	"github.com/settlehq/settle/telemetry"
)

// pipeline is the running service: consumers, the outbox relay and the
// admin listener. `settle run` and `settle dev` both run one.
type pipeline struct {
	store           *settle.Store
	consumer        *consumer.Consumer
	relay           *relay.Relay
	sweeper         *sweeper          // nil: no sweeps
	admin           net.Listener      // bound when the pipeline is built, so a taken port fails before anything starts
	adminTokens     map[string]string // the analysts' bearer tokens → their names; empty = none
	adminHosts      []string          // the Host values the analysts' surface answers
	adminZone       *time.Location    // the analysts' page's hover zone; nil = UTC only
	replayer        *kgo.Client       // the analysts' page's dead-letter replays; closed by run
	shutdownTimeout time.Duration

	// The HTTP edge (cmd/settle/edge.go): records API and webhook delivery.
	edge             edgeFlags
	settlementsTopic string

	// Telemetry: /metrics, spans, and the gauges read at scrape time
	// (consumer lag is read through kadm with these brokers and options).
	telemetry *telemetry.Telemetry
	brokers   []string
	kafkaOpts []kgoOpt
	group     string
}

// run runs the pipeline until ctx ends (or the consumer fails), then stops
// it in order: the consumer finishes its batch, commits and leaves the
// group; then the relay publishes what is left; then the admin listener
// closes. The whole stop is bounded by shutdownTimeout.
func (p *pipeline) run(ctx context.Context, a *app) error {
	defer p.replayer.Close()
	srv := &http.Server{Handler: p.adminHandler(a), ReadHeaderTimeout: 5 * time.Second}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(p.admin) }()
	// Closed last, on every return: a start that fails below must not
	// leave the port bound.
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		// Serve ends with ErrServerClosed after Shutdown; anything else
		// is the listener failing under the service.
		if err := <-httpDone; !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("admin listener", "addr", p.admin.Addr().String(), "err", err)
		}
	}()
	a.log.Info("admin listener up", "addr", p.admin.Addr().String(), "paths", "/livez /readyz /metrics, analysts' page /",
		"analysts", len(p.adminTokens), "hosts", strings.Join(p.adminHosts, ","))
	stopEdge, err := p.edge.start(ctx, a, p.store, p.settlementsTopic)
	defer stopEdge()
	if err != nil {
		return err
	}

	if p.telemetry != nil {
		unregister, err := p.registerGauges()
		if err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		defer unregister()
	}

	consumerCtx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRelay()
	consumerDone := make(chan error, 1)
	go func() { consumerDone <- p.consumer.Run(consumerCtx) }()
	relayDone := make(chan error, 1)
	go func() { relayDone <- p.relay.Run(relayCtx) }()
	if p.sweeper != nil {
		sweepDone := make(chan struct{})
		defer func() { <-sweepDone }()
		go func() { defer close(sweepDone); p.sweeper.run(relayCtx) }()
	}

	var runErr error
	select {
	case <-ctx.Done():
		a.log.Info("stopping: finishing the batch in hand, committing, leaving the group, flushing the outbox", "timeout", p.shutdownTimeout)
	case runErr = <-consumerDone:
		consumerDone <- runErr // read again below
		if runErr == nil {
			runErr = errors.New("consumer stopped on its own")
		}
	case runErr = <-relayDone:
		relayDone <- runErr
		if runErr == nil {
			runErr = errors.New("relay stopped on its own")
		}
	}

	deadline := time.NewTimer(p.shutdownTimeout)
	defer deadline.Stop()
	stopConsumer()
	var timedOut bool
	select {
	case err := <-consumerDone:
		if err != nil && runErr == nil {
			runErr = err
		}
	case <-deadline.C:
		timedOut = true
	}
	stopRelay()
	if !timedOut {
		select {
		case err := <-relayDone:
			if err != nil && runErr == nil {
				runErr = err
			}
		case <-deadline.C:
			timedOut = true
		}
	}
	if timedOut {
		return fmt.Errorf("stop took longer than --shutdown-timeout %s; what was not committed is read again on the next start", p.shutdownTimeout)
	}
	return runErr
}

// brokersDown returns why no seed broker answers, or "" when one does. It
// uses a client of its own, with the service's TLS and SASL settings, for
// the length of one readiness check.
func (p *pipeline) brokersDown(ctx context.Context) string {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(p.brokers...)}, p.kafkaOpts...)...)
	if err != nil {
		return "kafka: " + err.Error()
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		return fmt.Sprintf("kafka: no broker reachable at %s (%v): start the brokers or fix --brokers", strings.Join(p.brokers, ","), err)
	}
	return ""
}

// adminHandler serves /livez (the process answers) and /readyz (it can do
// its work: database reachable, schema current, group joined and not
// paused by an outage).
func (p *pipeline) adminHandler(a *app) http.Handler {
	mux := http.NewServeMux()
	// The analyst page and API take every path not registered here; they
	// check the Host (against DNS rebinding) and the tokens. The probes
	// and /metrics below do neither: kubelet and scrapers address the pod
	// by IP or by whatever name their configuration holds, and send no
	// token; what these paths tell (up, ready, counts by kind and reason)
	// names no tenant, subject or case, and changes nothing.
	mux.Handle("/", analyst.Handler(analyst.Config{Store: p.store, Tokens: p.adminTokens, Hosts: p.adminHosts, Logger: a.log,
		Replayer: kafkaReplayer{p.replayer}, TimeZone: p.adminZone}))
	if p.telemetry != nil {
		mux.Handle("GET /metrics", p.telemetry.Handler())
	}
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		var reasons []string
		if err := p.store.Pool().Ping(ctx); err != nil {
			reasons = append(reasons, "database unreachable: "+err.Error())
		} else if err := schema.Check(ctx, p.store.Pool()); err != nil {
			reasons = append(reasons, err.Error())
		}
		if why := p.consumer.NotReadyReason(); why != "" {
			// "Not joined" alone does not say whether the brokers are
			// down or the group is slow: ask the brokers.
			if down := p.brokersDown(ctx); down != "" {
				reasons = append(reasons, down)
			}
			reasons = append(reasons, why)
		}
		w.Header().Set("Content-Type", "application/json")
		if len(reasons) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		// The map always marshals; a failed write is a client gone.
		_ = json.NewEncoder(w).Encode(map[string]any{
			"ready": len(reasons) == 0, "reasons": reasons, "relay_leader": p.relay.Leader(),
		})
	})
	return mux
}
