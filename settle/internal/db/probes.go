package db

import "github.com/jackc/pgx/v5"

// ProbeTx begins a transaction (READ COMMITTED) whose statements look rows
// up by key, and keeps its plans on index probes, in the same round trip:
// the settling transactions and the Idempotency-Key groups begin with it.
// Their tables grow from nothing faster than autovacuum analyses them, and
// a plan made while a table was small stays in the statement cache as it
// grows: without these settings the fenced write of a group's
// Idempotency-Key answers scanned idempotency_keys whole for every group
// (16 ms at 40,000 keys, settle bench --only edge with auto_explain).
//
// Their plans are the cached generic ones, made once per statement and
// connection, never planned again for the values: a small batch (a group
// of the HTTP edge, a quiet stream) binds arrays of a few elements, which a
// custom plan estimates at their length and the generic plan at ten rows,
// so PostgreSQL judged the generic plan dearer and planned every such
// statement at every call (a quarter of the edge's statement time,
// BENCHMARKS.md "HTTP edge"). With the settings above, a generic plan is
// index probes whatever the table held when it was made.
var ProbeTx = pgx.TxOptions{BeginQuery: "BEGIN ISOLATION LEVEL READ COMMITTED; " + ProbesOnly("SET LOCAL")}

// ProbesOnly is the statements that keep a session's (set "SET") or a
// transaction's ("SET LOCAL") plans on index probes, in the backend itself:
// no plan scans a table, hashes or merges, or starts parallel workers for a
// read of a few thousand rows on a stale row estimate; and every plan is
// the statement's cached generic one (see ProbeTx), so Planned has no
// effect under them.
func ProbesOnly(set string) string {
	return set + " enable_seqscan = off; " + set + " enable_hashjoin = off; " + set + " enable_mergejoin = off; " +
		set + " max_parallel_workers_per_gather = 0; " + set + " plan_cache_mode = force_generic_plan"
}
