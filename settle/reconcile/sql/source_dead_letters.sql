-- name: SourceDeadLetters :many
-- One page of dead letters, keyset-paged on id, for matching a source
-- export's identities to the records settle dead-lettered.
SELECT d.id, d.value, d.headers, d.reason, d.error
  FROM dead_letters d
 WHERE d.id > sqlc.arg(after_id)
 ORDER BY d.id
 LIMIT sqlc.arg(page_rows);
