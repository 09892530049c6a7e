package service

import (
	"context"
	"fmt"
	"time"

	"github.com/settlehq/settle/canary"
	"github.com/settlehq/settle/settle"
)

// newCanary is the canary of cfg's topics, Kafka options, logger and
// metrics.
func newCanary(cfg Config) (*canary.Canary, error) {
	cc := canary.Config{Brokers: cfg.Brokers, ClientOpts: cfg.KafkaOpts, Logger: cfg.Logger,
		UsageTopic: cfg.Consumer.Topic, ResultsTopic: cfg.Consumer.ResultsTopic}
	if st := cfg.Store; st != nil {
		cc.SettlementsTopic = st.Config().SettlementsTopic
		// The case its conflicting payload opens is rejected at once: it
		// was sent on purpose, and no analyst is to see it.
		cc.ResolveCase = func(ctx context.Context, id int64) error {
			_, err := st.Resolve(ctx, settle.ResolveRequest{CaseID: id, Decision: "reject",
				Reason: canary.CaseReason, By: canary.Tenant})
			return err
		}
	}
	if cfg.Telemetry != nil {
		cc.Metrics = cfg.Telemetry.Metrics
	}
	// A run waits for its outcomes at most the interval, so runs never
	// overlap.
	cc.Deadline = min(cfg.CanaryEvery, canaryDeadlineMax)
	return canary.New(cc)
}

// CanaryIntervalShortest is the shortest canary interval: a run sends its delayed
// retry 5 s after the first copy and waits for the outcomes.
const CanaryIntervalShortest = 10 * time.Second

// canaryDeadlineMax bounds one canary run of a long interval.
const canaryDeadlineMax = 2 * time.Minute

// canaryUnready says why the canary makes the service unready: it failed
// CanaryUnreadyAfter runs in a row. "" = it does not.
func (s *Service) canaryUnready() string {
	if s.canary == nil || s.cfg.CanaryUnreadyAfter <= 0 {
		return ""
	}
	if n := s.canary.FailuresInARow(); n >= int64(s.cfg.CanaryUnreadyAfter) {
		return fmt.Sprintf("canary: %d runs in a row failed (settle_canary_failures_total names the scenarios; the log has their records)", n)
	}
	return ""
}
