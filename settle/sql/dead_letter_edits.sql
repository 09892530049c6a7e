-- name: DeadLetterEditInsert :one
-- Records an edit of a dead letter (migration 0024): the trigger refuses a
-- login that does not operate and records a person's login as the author.
INSERT INTO dead_letter_edits (tenant_id, dead_letter_id, diff, key, value, edited_by, reason)
VALUES (sqlc.arg(tenant_id), sqlc.arg(dead_letter_id), sqlc.arg(diff), sqlc.narg(key), sqlc.arg(value), sqlc.arg(edited_by), sqlc.arg(reason))
RETURNING id, edited_by, at;
