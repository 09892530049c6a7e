package main

import (
	"context"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/telemetry"
)

// telemetryFlags configure traces (metrics are always on /metrics).
type telemetryFlags struct {
	OTLPEndpoint     string  `name:"otlp-endpoint" env:"SETTLE_OTLP_ENDPOINT,OTEL_EXPORTER_OTLP_ENDPOINT" help:"OTLP/HTTP endpoint for traces, e.g. http://otel-collector:4318."`
	TraceSampleRatio float64 `name:"trace-sample-ratio" hidden:"" env:"SETTLE_TRACE_SAMPLE_RATIO" default:"1" help:"Share of new traces sampled, 0..1; a record with a sampled parent is always sampled."`
}

func (f telemetryFlags) telemetry(ctx context.Context) (*telemetry.Telemetry, error) {
	host, _ := os.Hostname()
	ratio := f.TraceSampleRatio
	t, err := telemetry.New(ctx, telemetry.Config{ServiceInstance: host, OTLPEndpoint: f.OTLPEndpoint, TraceSampleRatio: ratio})
	if err != nil {
		return nil, usageError{err.Error()}
	}
	return t, nil
}

// registerGauges registers the pipeline's observable gauges: outbox
// backlog, open conflict cases, readiness and, through kadm, the group's
// lag per partition. It returns a function that unregisters them and
// closes the admin client.
func (p *pipeline) registerGauges() (func(), error) {
	brokers, opts, group := p.brokers, p.kafkaOpts, p.group
	g := telemetry.Gauges{
		OutboxBacklog:     inspect.New(p.store).OutboxBacklog,
		ConflictCasesOpen: inspect.New(p.store).OpenConflictCases,
		Ready:             p.consumer.Ready,
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
	unregister, err := p.telemetry.Metrics.RegisterGauges(g)
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
