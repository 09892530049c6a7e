-- name: DeadLetterReplayed :exec
-- Records where replayed dead letters ($1 ids) went ($2 topics, $3
-- partitions, $4 offsets). A second replay of one adds a row.
INSERT INTO dead_letter_replays (tenant_id, dead_letter_id, topic, partition, "offset")
SELECT d.tenant_id, d.id, k.topic, k.partition, k."offset"
  FROM unnest(@id::bigint[], @topic::text[], @partition::integer[], sqlc.arg('offset')::bigint[]) AS k (id, topic, partition, "offset")
  JOIN dead_letters d ON d.id = k.id
    ON CONFLICT ON CONSTRAINT dead_letter_replays_pkey DO NOTHING;

-- name: DeadLetterResent :exec
-- Records where the record of an edit of a dead letter went.
INSERT INTO dead_letter_replays (tenant_id, dead_letter_id, topic, partition, "offset", edit_id)
VALUES (sqlc.arg(tenant_id), sqlc.arg(dead_letter_id), sqlc.arg(topic), sqlc.arg(partition), sqlc.arg(to_offset), sqlc.arg(edit_id));
