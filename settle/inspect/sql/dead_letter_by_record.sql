-- name: DeadLetterByRecord :many
-- The dead letters whose bytes name this record (dead_letters_record), oldest
-- first: explain of a record that was dead-lettered.
SELECT d.id, d.reason, d.error, d.at
  FROM dead_letters d
 WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.record_id = sqlc.arg(record_id) AND d.record_id <> ''
   AND d.account_period = sqlc.arg(account_period)
 ORDER BY d.id
 LIMIT 100;
