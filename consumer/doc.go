// Package consumer reads the usage topic as a Kafka consumer group and hands
// each partition's records, in order and in batches, to the settlement core
// (package settle), then publishes one result per record to the results
// topic and commits the group's offsets.
//
// It owns the consume loop and its failure handling: outages pause it, a
// poison record is isolated by bisection and dead-lettered after bounded
// retries, and offsets reach Kafka only after the transaction that covers
// them has committed. It never speaks SQL and never decides an outcome: the
// settle package does both.
//
// # Why offsets also live in PostgreSQL
//
// The settling transaction records, per group and partition, the next
// offset to read (table consumer_offsets) together with the effects of the
// records before it. Kafka's committed offset is written afterwards and can
// lag (a crash between the two) or, after a database restore, lead. The
// copy in PostgreSQL is the one that is always exactly as far as the data:
//
//   - Kafka behind PostgreSQL (a crash after the transaction, before the
//     commit): the consumer resumes from Kafka's offset, and the records in
//     between are recognised by their coordinates (table deliveries) and get
//     their stored result again; nothing settles twice.
//   - Kafka ahead of PostgreSQL (the database was restored from a backup):
//     the records between the two are not in the database at all. Resuming
//     from Kafka's offset would lose them silently, so on assignment the
//     consumer seeks back to PostgreSQL's offset and settles them again.
//
// Offsets are still committed to Kafka: lag monitoring and autoscalers read
// the group's commits, and they are where a fresh assignment starts.
//
// # Batches it does not read
//
// A compressed batch is decompressed whole before any of its records is
// seen, so the consumer caps it (Config.DecompressBatchBytesMax, derived
// from the memory limit). A batch past the cap is dead-lettered whole and
// its partition moved past it, in PostgreSQL first (skip.go). A batch the
// client cannot read for another reason is never skipped: its partition
// holds and Ready says so.
package consumer
