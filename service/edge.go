package service

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/settlehq/settle/edge/idempotency"
	"github.com/settlehq/settle/edge/ingest"
	"github.com/settlehq/settle/edge/webhook"
	"github.com/settlehq/settle/edge/webhook/deliveries"
	"github.com/settlehq/settle/settle/message"
)

// startEdge starts the parts of the HTTP edge that are configured (the
// records API of package edge/ingest when it has tokens, webhook delivery
// of package edge/webhook when it has a URL) and
// returns the function that stops them: the API first, then the webhook
// workers.
func (s *Service) startEdge(ctx context.Context) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	log := s.cfg.Logger
	if len(s.cfg.API.Tokens) > 0 {
		api, err := ingest.NewAPI(s.cfg.Store, idempotency.New(s.cfg.Store), s.cfg.API)
		if err != nil {
			return stop, &ConfigError{err}
		}
		ln, err := net.Listen("tcp", s.cfg.APIAddr)
		if err != nil {
			return stop, fmt.Errorf("API listener on %s: %w (choose another with --api-addr)", s.cfg.APIAddr, err)
		}
		srv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second}
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(ln) }()
		log.Info("records API up", "addr", ln.Addr().String(), "path", "POST /v1/records", "tenants", len(s.cfg.API.Tokens))
		stops = append(stops, func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			<-done
		})
	}
	if s.cfg.Webhook.URL == "" {
		s.warnUnsentWebhooks(ctx)
		return stop, nil
	}
	wh, err := webhook.New(deliveries.New(s.cfg.Store), s.cfg.Webhook)
	if err != nil {
		return stop, &ConfigError{err}
	}
	// Subscribing here makes a failure to subscribe a failure to start
	// (Run subscribes again, harmlessly).
	if err := wh.Subscribe(ctx); err != nil {
		return stop, fmt.Errorf("webhook: %w", err)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); _ = wh.Run(wctx) }()
	stops = append(stops, func() { cancel(); <-done })
	log.Info("webhook delivery up", "url", wh.URL(), "workers", s.cfg.Webhook.Workers)
	return stop, nil
}

// warnUnsentWebhooks warns when settlements are queued for webhook delivery
// (a service ran with a webhook URL before) but this one sends none: the
// subscription stays until the schema's owner removes it, and its
// deliveries wait for a service with the URL.
func (s *Service) warnUnsentWebhooks(ctx context.Context) {
	topic := cmp.Or(s.cfg.Webhook.Topic, message.TopicSettlements)
	since, waiting, ok, err := deliveries.New(s.cfg.Store).Subscription(ctx, topic)
	if err != nil || !ok {
		return // a read that failed says nothing worth stopping for
	}
	s.cfg.Logger.Warn("settlements are queued for webhook delivery, but this service sends none (no --webhook-url)",
		"topic", topic, "subscribed_since", since, "deliveries_waiting", waiting,
		"fix", "run a service with --webhook-url to send them, or stop queuing: DELETE FROM webhook_subscriptions WHERE topic = '"+topic+"' as the schema's owner")
}
