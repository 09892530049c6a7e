-- name: HoldUpdate :exec
-- Writes the holds a batch changed, guarded on the revision it read: the
-- statement fails unless it updated every hold it names (settle_guard).
WITH u AS (
    UPDATE holds h
       SET remaining = k.remaining, status = k.status, closed_by = nullif(k.closed_by, 0), rev = h.rev + 1
      FROM unnest(@identity_id::bigint[], (@remaining::text[])::numeric[], @status::text[], @closed_by::bigint[], @rev::integer[])
           AS k (identity_id, remaining, status, closed_by, rev)
     WHERE h.identity_id = k.identity_id AND h.rev = k.rev
 RETURNING 1
)
SELECT settle_guard('hold_update', (SELECT count(*) FROM u), cardinality(@identity_id::bigint[]));
