-- name: DeadLetterResendAt :many
-- The corrections whose resent record is the one at these coordinates,
-- with their letters: what explain names as the letter a record was
-- corrected from. A letter whose tenant could not be read ('') is shown
-- to the record's tenant: the record was made from it.
SELECT d.id AS dead_letter_id, d.reason AS letter_reason, d.error AS letter_error, d.at AS letter_at,
       e.id, e.edited_by, e.reason, e.at
  FROM dead_letter_replays r
  JOIN dead_letter_edits e ON e.tenant_id = r.tenant_id AND e.id = r.edit_id
  JOIN dead_letters d ON d.tenant_id = r.tenant_id AND d.id = r.dead_letter_id
 WHERE r.topic = sqlc.arg(topic) AND r.partition = sqlc.arg(partition) AND r."offset" = sqlc.arg(resent_offset)
   AND r.tenant_id IN ('', sqlc.arg(tenant_id)::text)
 ORDER BY e.id;
