-- name: DeadLetterReplayLast :many
-- Where the dead letter d of a tenant was last sent back to (its newest
-- dead_letter_replays row, by the primary key's prefix): the page a replay
-- form redirects to shows it. No row: never replayed (or pruned).
SELECT r.topic, r.partition, r."offset"
  FROM dead_letter_replays r
 WHERE r.tenant_id = sqlc.arg(tenant_id) AND r.dead_letter_id = sqlc.arg(dead_letter_id)
 ORDER BY r.at DESC, r."offset" DESC
 LIMIT 1;
