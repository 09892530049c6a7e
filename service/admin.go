package service

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/settle/schema"
)

// adminHandler serves /livez (the process answers), /readyz (it can do
// its work: database reachable, schema current, group joined and not
// paused by an outage), /metrics, and the analysts' page on every other
// path.
func (s *Service) adminHandler() http.Handler {
	mux := http.NewServeMux()
	// The analyst page and API take every path not registered here; they
	// check the Host (against DNS rebinding) and the tokens. The probes
	// and /metrics below do neither: kubelet and scrapers address the pod
	// by IP or by whatever name their configuration holds, and send no
	// token; what these paths tell (up, ready, counts by kind and reason)
	// names no tenant, subject or case, and changes nothing.
	ac := s.cfg.Analyst
	ac.Hosts = s.hosts
	if ac.Replayer == nil {
		ac.Replayer = kafkaReplayer{s.replayer, s.cfg.Store}
	}
	if ac.Resender == nil {
		ac.Resender = kafkaReplayer{s.replayer, s.cfg.Store}
	}
	mux.Handle("/", analyst.Handler(ac))
	if s.cfg.Telemetry != nil {
		mux.Handle("GET /metrics", s.cfg.Telemetry.Handler())
	}
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		reasons := s.notReadyReasons(ctx)
		w.Header().Set("Content-Type", "application/json")
		if len(reasons) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		// skipped_batches: record batches dead-lettered whole and moved
		// past (batch_too_large), the last 16: the partition moved on, so
		// the service is ready, but an operator has records to replay.
		_ = json.NewEncoder(w).Encode(map[string]any{ // a probe that hung up has its answer
			"ready": len(reasons) == 0, "reasons": reasons, "relay_leader": s.relay.Leader(),
			"skipped_batches": s.consumer.Skipped(),
		})
	})
	return mux
}

// notReadyReasons says why the service cannot do its work; none when it
// can.
func (s *Service) notReadyReasons(ctx context.Context) []string {
	var reasons []string
	pool := s.cfg.Store.Pool()
	if err := pool.Ping(ctx); err != nil {
		reasons = append(reasons, "database unreachable: "+err.Error())
	} else if err := schema.Check(ctx, pool); err != nil {
		reasons = append(reasons, err.Error())
	}
	if why := s.canaryUnready(); why != "" {
		reasons = append(reasons, why)
	}
	if why := s.consumer.NotReadyReason(); why != "" {
		// "Not joined" alone does not say whether the brokers are down or
		// the group is slow: ask the brokers.
		if down := s.brokersDown(ctx); down != "" {
			reasons = append(reasons, down)
		}
		reasons = append(reasons, why)
	}
	return reasons
}

// brokersDown returns why no seed broker answers, or "" when one does. It
// uses a client of its own, with the service's TLS and SASL settings, for
// the length of one readiness check.
func (s *Service) brokersDown(ctx context.Context) string {
	brokers := s.cfg.Brokers
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, s.cfg.KafkaOpts...)...)
	if err != nil {
		return "kafka: " + err.Error()
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		return fmt.Sprintf("kafka: no broker reachable at %s (%v): start the brokers or fix --brokers", strings.Join(brokers, ","), err)
	}
	return ""
}

// adminHosts are the Host values the analysts' page answers on the bound
// listener ln: its own address; when it is loopback, also localhost,
// 127.0.0.1 and [::1] on its port; when it is every interface, each
// interface's address and localhost on its port; plus the allowed hosts.
// A name rebound by DNS to one of these addresses is none of them.
func adminHosts(ln net.Addr, allowed []string) []string {
	tcp, ok := ln.(*net.TCPAddr)
	if !ok {
		return allowed
	}
	port := strconv.Itoa(tcp.Port)
	var hosts []string
	switch {
	case tcp.IP.IsLoopback():
		hosts = append(hosts, net.JoinHostPort(tcp.IP.String(), port), "localhost:"+port, "127.0.0.1:"+port, "[::1]:"+port)
	case tcp.IP.IsUnspecified():
		// Not 0.0.0.0 itself: no client names it but a page that should
		// not be reaching loopback.
		hosts = append(hosts, "localhost:"+port)
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLinkLocalUnicast() {
					hosts = append(hosts, net.JoinHostPort(ipn.IP.String(), port))
				}
			}
		}
	default:
		hosts = append(hosts, net.JoinHostPort(tcp.IP.String(), port))
	}
	return append(hosts, allowed...)
}
