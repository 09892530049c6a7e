-- name: WaitingOfSubject :many
-- The records of one subject of a tenant still waiting for their target,
-- oldest first: the account page's waiting records. waiting_since holds
-- only the rows still waiting; the subject is read from the record's
-- canonical form. Bounded by rows_max.
SELECT w.account_period, w.record_id, w.operation, w.target_period, w.target_record_id, w.since,
       coalesce(convert_from(w.canonical, 'UTF8')::jsonb ->> 'currency', '')::text AS currency
  FROM waiting w
 WHERE w.status = 'waiting' AND w.tenant_id = sqlc.arg(tenant)
   AND convert_from(w.canonical, 'UTF8')::jsonb ->> 'subject' = sqlc.arg(subject)::text
 ORDER BY w.since, w.id
 LIMIT sqlc.arg(rows_max);
