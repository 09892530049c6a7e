// Package faults proves settle's exactly-once promise under faults: it runs
// the real `settle run` binary as a child process against a Kafka-protocol
// broker (franz-go's kfake) in the test process and a fresh PostgreSQL
// database, kills it with SIGKILL at named crash points
// (internal/crashpoint), pauses it with SIGSTOP, terminates its database
// backends, restarts PostgreSQL and injects broker faults, and after every
// fault checks the invariants:
//
//   - one effect per identity (no identity with two ledger rows in one
//     bucket, no scope key claimed twice);
//   - one delivery per input record, none lost (every offset below
//     PostgreSQL's recorded next offset has its delivery row; at the end,
//     every record of the usage topic has one);
//   - every account's balance, held amount and sequence (its newest ledger
//     row's) equal its ledger rows, and (at the end) the balance and held
//     amount the exact model of the generated workload (internal/workload)
//     predicts;
//   - no Kafka committed offset ahead of PostgreSQL's;
//   - (at the end) every outbox row published;
//
// and every other invariant settle/reconcile holds: Check is reconcile.Run
// underneath, given the offsets and end offsets faults reads from the
// broker and the model's accounts, and keeps no SQL of its own.
//
// It is test support and tests only: production code must never import it.
// The harness (Binary, Start, Check, Workload) is exported so that other
// multi-process tests (e2e/) can share it; starting, stopping and killing
// a child process is internal/proctest's, which e2e/ uses as well. TESTING.md says how to run the
// quick and the full tier.
package faults
