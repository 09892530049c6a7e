-- name: ConsumerOffsetLookup :many
-- The next offsets PostgreSQL holds for one consumer group: what the
-- transactions that committed covered.
SELECT topic, partition, next_offset
  FROM consumer_offsets
 WHERE group_id = @group_id;
