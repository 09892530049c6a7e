package main

import (
	"context"
	"os"

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
