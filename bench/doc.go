// Package bench is settle's benchmark: it generates a realistic usage
// workload (internal/workload, the generator the tests share) and, in one
// run, measures the pipeline end to end (Kafka-protocol broker → consumer →
// PostgreSQL → outbox relay → settlements topic), the settlement core alone
// (batches straight into settle.Store.Settle), and two baselines of the same
// rows on the same server: a per-record transaction handler and a no-checks
// bulk COPY (the ceiling). It writes the figures as
// JSON and Markdown and draws PNG plots.
//
// Every run gets its own fresh database (created from the server URL,
// dropped afterwards unless kept) and ends with the exactly-once checks
// (one effect per identity, balances equal the sum of their rows, one
// delivery per input record, every settlement published once); a run that
// breaks one fails, however fast it was.
//
// It is the library of cmd/settle-bench. The service's packages run
// in-process here, so the end-to-end figures are of that binary's build
// (Report.Build names it); the edge part drives a settle binary's
// `settle run` over HTTP.
//
// It only drives the public APIs of settle, consumer and relay, and keeps
// its own SQL (baseline tables, checks) in sql/*.sql. It must never be
// imported by the service.
package bench
