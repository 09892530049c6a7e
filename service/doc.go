// Package service is the running settle service: the consumer group
// member, the outbox relay, the sweeper, the admin listener (/livez,
// /readyz and its reasons, /metrics, the analysts' page with its
// dead-letter replay) and, when configured, the HTTP edge's records API
// and webhook delivery. One Run serves `settle run`, `settle dev` and the
// benchmark's end-to-end runs; they differ only in their Config.
//
// It owns the wiring and the lifetimes: what starts in which order, what
// readiness means, and the ordered stop (the consumer finishes its batch,
// commits and leaves the group; then the relay publishes what is left;
// then the listeners close), all within Config.ShutdownTimeout. It also
// owns the dead-letter replay producer that the analysts' page and
// `settle dlq replay` share.
//
// It never speaks SQL (every read and write goes through the store it is
// given, package settle), never parses flags or the environment (cmd/settle
// fills in a Config), never opens the database or the process's telemetry
// (it is handed them, already built), and never imports cmd/ or any
// package that runs it.
package service
