-- name: ConsumerOffsetLookup :many
-- The next offsets PostgreSQL holds for one consumer group: what the
-- transactions that committed covered.
SELECT topic, partition, next_offset
  FROM consumer_offsets
 WHERE group_id = @group_id;

-- name: ConsumerOffsetUpsert :exec
-- Records the next offset to read, in the transaction that covers the
-- records before it. Never moves backwards (a stale owner cannot rewind it).
INSERT INTO consumer_offsets (group_id, topic, partition, next_offset)
SELECT k.group_id, k.topic, k.partition, k.next_offset
  FROM unnest(@group_id::text[], @topic::text[], @partition::integer[], @next_offset::bigint[])
       AS k (group_id, topic, partition, next_offset)
    ON CONFLICT ON CONSTRAINT consumer_offsets_pkey DO UPDATE
   SET next_offset = greatest(consumer_offsets.next_offset, excluded.next_offset), updated_at = now();
