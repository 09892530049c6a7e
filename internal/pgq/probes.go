package pgq

import "strings"

// The settling transactions (Tx, an HTTP group's Idempotency-Keys
// included), and the relay's session, look rows up by key, and keep their
// plans on index probes. Their tables grow from nothing faster than
// autovacuum analyses them, and a plan made while a table was small stays
// in the statement cache as it grows: without these settings a write of
// Idempotency-Key answers scanned idempotency_keys whole for every group
// (`git show aba77c0:BENCHMARKS.md`, "What the edge's figures come from").
//
// Their plans are the cached generic ones, made once per statement and
// connection, never planned again for the values: a small batch (a group
// of the HTTP edge, a quiet stream) binds arrays of a few elements, which a
// custom plan estimates at their length and the generic plan at ten rows,
// so PostgreSQL judged the generic plan dearer and planned every such
// statement at every call (a quarter of the edge's statement time,
// BENCHMARKS.md, the same section). With the other settings, a generic plan is
// index probes whatever the table held when it was made.
var probeSettings = [...][2]string{
	{"enable_seqscan", "off"}, {"enable_hashjoin", "off"}, {"enable_mergejoin", "off"},
	{"max_parallel_workers_per_gather", "0"}, // no workers for a read of a few thousand rows on a stale estimate
	{"plan_cache_mode", "force_generic_plan"},
}

// ProbesOnly is the statements that keep a session's (set "SET") or a
// transaction's ("SET LOCAL") plans on index probes and generic, in the
// backend itself: no plan scans a table, hashes or merges, or starts
// parallel workers, and Planned has no effect under them.
func ProbesOnly(set string) string {
	var b strings.Builder
	for i, kv := range probeSettings {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(set + " " + kv[0] + " = " + kv[1])
	}
	return b.String()
}

// probesLocal is ProbesOnly("SET LOCAL") as one statement of the extended
// protocol, for a batch.
func probesLocal() string {
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, kv := range probeSettings {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("set_config('" + kv[0] + "', '" + kv[1] + "', true)")
	}
	return b.String()
}
