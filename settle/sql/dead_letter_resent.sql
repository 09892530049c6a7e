-- name: DeadLetterResent :exec
-- Records where the record of an edit of a dead letter went.
INSERT INTO dead_letter_replays (tenant_id, dead_letter_id, topic, partition, "offset", edit_id)
VALUES (sqlc.arg(tenant_id), sqlc.arg(dead_letter_id), sqlc.arg(topic), sqlc.arg(partition), sqlc.arg(to_offset), sqlc.arg(edit_id));
