// Package workload generates the usage records that settle's benchmark and
// its multi-process tests (bench/, faults/, e2e/) send, and holds an exact
// model of what the contract (docs/CONTRACT.md) says each of them must end
// as: the outcome of every record, the effect of every identity, and every
// account's balance and held amount.
//
// One Workload is a deterministic stream: the same Config (seed included)
// gives the same records, byte for byte, in the same order, on the same
// partitions. Records are JSON values keyed "tenant/subject", as producers
// key them; each names the partition it belongs on (FNV-1a of its key
// modulo the partition count) and the offset it gets when the stream is
// produced in order to an empty topic.
//
// The model is exact, not statistical, because the generator only emits
// records whose fate it can decide: one account's records share one
// partition, so they settle in the order generated; a dependent record (a
// correction, a refund, a capture, a hold release, a conflicting repeat)
// always follows its target on its target's partition; a correction always
// carries a version above its chain's. What settle decides from state (a
// hold refused for lack of funds, a refund of a chain charged nothing, a
// correction of a refunded chain) the model decides from the same state,
// record by record. The one deliberate exception is a duplicate on another
// partition (Mix.CrossPartition): which copy settles first is up to the
// consumers, so the model knows that one of the two settles and one is a
// duplicate, and with the same effect — it refuses that variant together
// with holds, whose decisions depend on when a charge lands.
//
// It owns record generation and the model, nothing else: it knows nothing
// of PostgreSQL, never opens a connection and never reads what settle
// stored; the callers compare the model with what they read. Nor does it
// import a Kafka client: a Record carries the partition, key and value that
// a kgo.Record or a message.Input is made of, because the benchmark's core
// runs feed settle.Store directly without any broker, and a generator that
// depends on no transport stays a pure function of its Config. It must
// never be imported by the service: it is test and benchmark support.
//
// settle/model_test.go does not use it, on purpose: that test's own
// generator and model are the independent reading of the contract that
// checks settle, and this package is checked against settle (the
// package's tests settle every kind of record it makes and compare).
package workload
