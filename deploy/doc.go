// Package deploy holds settle's deployment files — the Dockerfile,
// compose.yaml with Kafka (KRaft), PostgreSQL, settle and an OpenTelemetry
// collector, the Kubernetes manifests under k8s/ and the Grafana dashboard
// under grafana/ — and the offline tests that check them (deploy_test.go).
// It has no code of its own: nothing may import it.
package deploy
