UPDATE waiting w SET status = k.status, case_id = coalesce(nullif(k.case_id, 0), w.case_id)
  FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS k (id, status, case_id)
 WHERE w.id = k.id
