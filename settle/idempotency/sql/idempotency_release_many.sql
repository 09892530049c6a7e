-- name: IdempotencyReleaseMany :many
-- Ends the leases of a group's claims whose work failed, fenced like
-- idempotency_release.sql. Returns the ids it released.
UPDATE idempotency_keys AS k
   SET lease_until = now()
  FROM unnest(@id::bigint[], (@attempt_id::text[])::uuid[]) AS r(id, attempt_id)
 WHERE k.id = r.id
   AND k.attempt_id = r.attempt_id
   AND k.status = 'in_progress'
RETURNING k.id;
