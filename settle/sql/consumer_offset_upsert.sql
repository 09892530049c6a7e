-- Records the next offset to read, in the transaction that covers the
-- records before it. Never moves backwards (a stale owner cannot rewind it).
INSERT INTO consumer_offsets (group_id, topic, partition, next_offset)
SELECT * FROM unnest($1::text[], $2::text[], $3::integer[], $4::bigint[])
    ON CONFLICT ON CONSTRAINT consumer_offsets_pkey DO UPDATE
   SET next_offset = greatest(consumer_offsets.next_offset, excluded.next_offset), updated_at = now()
