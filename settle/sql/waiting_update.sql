-- name: WaitingUpdate :exec
UPDATE waiting w SET status = k.status, case_id = coalesce(nullif(k.case_id, 0), w.case_id)
  FROM unnest(@id::bigint[], @status::text[], @case_id::bigint[]) AS k (id, status, case_id)
 WHERE w.id = k.id;
