-- Waiting operations that a batch repeats (by identity) or wakes (by target),
-- locked: the batch may apply them.
SELECT w.id, w.tenant_id, w.account_period, w.record_id, w.operation, w.target_period, w.target_record_id,
       w.fingerprint, w.canonical, w.key, w.value, w.headers, w.topic, w.partition, w."offset",
       w.response, w.status, coalesce(w.case_id, 0)
  FROM waiting w
 WHERE w.status <> 'applied'
   AND ((w.tenant_id, w.account_period, w.record_id, w.operation) IN
            (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]))
        OR (w.tenant_id, w.target_period, w.target_record_id) IN
            (SELECT * FROM unnest($5::text[], $6::text[], $7::text[])))
 ORDER BY w.id
   FOR UPDATE OF w
