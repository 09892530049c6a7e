UPDATE waiting w SET status = k.status
  FROM unnest($1::bigint[], $2::text[]) AS k (id, status)
 WHERE w.id = k.id
