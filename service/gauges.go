package service

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/telemetry"
)

// registerGauges registers the service's observable gauges: outbox
// backlog, open conflict cases, readiness and, through kadm, the group's
// lag per partition. It returns a function that unregisters them and
// closes the admin client.
func (s *Service) registerGauges() (func(), error) {
	brokers, opts, group := s.cfg.Brokers, s.cfg.KafkaOpts, s.cfg.Consumer.Group
	read := inspect.New(s.cfg.Store)
	g := telemetry.Gauges{
		OutboxBacklog:     read.OutboxBacklog,
		ConflictCasesOpen: read.OpenConflictCases,
		// The /readyz answer: the database and its schema too, not only
		// the consumer (a database away left settle_ready at 1).
		Ready: func(ctx context.Context) bool {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			return len(s.notReadyReasons(ctx)) == 0
		},
	}
	var cl *kgo.Client
	if len(brokers) > 0 {
		var err error
		cl, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RequestTimeoutOverhead(2 * time.Second)}, opts...)...)
		if err != nil {
			return nil, err
		}
		adm := kadm.NewClient(cl)
		g.ConsumerLag = func(ctx context.Context) (map[string]map[int32]int64, error) {
			lags, err := adm.Lag(ctx, group)
			if err != nil {
				return nil, err
			}
			out := map[string]map[int32]int64{}
			for _, l := range lags {
				if err := l.Error(); err != nil {
					return nil, err
				}
				for topic, ps := range l.Lag {
					for part, ml := range ps {
						if ml.Err != nil || ml.Lag < 0 {
							continue
						}
						if out[topic] == nil {
							out[topic] = map[int32]int64{}
						}
						out[topic][part] = ml.Lag
					}
				}
			}
			return out, nil
		}
	}
	unregister, err := s.cfg.Telemetry.Metrics.RegisterGauges(g)
	if err != nil {
		if cl != nil {
			cl.Close()
		}
		return nil, err
	}
	return func() {
		_ = unregister()
		if cl != nil {
			cl.Close()
		}
	}, nil
}
