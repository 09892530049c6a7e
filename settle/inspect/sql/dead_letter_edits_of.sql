-- name: DeadLetterEditsOf :many
-- The edits of one dead letter, oldest first, with where each resent
-- record went (NULL once settle prune removed the replay row).
SELECT e.id, e.diff, e.value, e.edited_by, e.reason, e.at, r.topic, r.partition, r."offset"
  FROM dead_letter_edits e
  LEFT JOIN dead_letter_replays r ON r.tenant_id = e.tenant_id AND r.dead_letter_id = e.dead_letter_id AND r.edit_id = e.id
 WHERE e.tenant_id = sqlc.arg(tenant_id) AND e.dead_letter_id = sqlc.arg(dead_letter_id)
 ORDER BY e.id;
