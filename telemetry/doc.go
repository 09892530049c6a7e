// Package telemetry owns settle's OpenTelemetry set-up: a MeterProvider
// whose metrics are exported for Prometheus on /metrics, a TracerProvider
// that exports spans over OTLP/HTTP when an endpoint is configured, W3C
// trace context carried in Kafka record headers, and the named instruments
// the consumer, the relay and the service record into.
//
// Every metric settle exports is declared here, in one place, so that the
// names the Grafana dashboard and the alert rules use are the names the
// code records (deploy/ checks the dashboard against a real scrape).
//
// It never reads the database or talks to Kafka itself: observable gauges
// (lag, backlog, open cases) take callbacks from their owners. All
// recording methods are safe on a nil *Metrics, so packages run without
// telemetry in tests.
package telemetry
