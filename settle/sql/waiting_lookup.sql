-- name: WaitingLookup :batchmany
-- Waiting operations that a batch repeats (by identity) or wakes (by target),
-- locked: the batch may apply them. Two index look-ups, not one OR that
-- would scan the table, and only for the keys of tenants with an operation
-- waiting: a probe of waiting_target per tenant of the batch (@tenants,
-- each once) spares the probes of every key of a tenant with none, the
-- usual case. The tenants found (live) filter the keys as they are
-- unnested, before any probe, and with none the keys are not unnested.
WITH live AS MATERIALIZED (
    SELECT array_agg(t.t) AS tenants
      FROM unnest(@tenants::text[]) AS t
     WHERE EXISTS (SELECT 1 FROM waiting x WHERE x.tenant_id = t.t AND x.status <> 'applied')
)
SELECT w.id, w.tenant_id, w.account_period, w.record_id, w.operation, w.target_period, w.target_record_id,
       w.fingerprint, w.canonical, w.key, w.value, w.headers, w.topic, w.partition, w."offset",
       w.response, w.status, coalesce(w.case_id, 0)
  FROM waiting w
 WHERE w.id IN (SELECT x.id
                  FROM unnest(@tenant_id::text[], @account_period::text[], @record_id::text[], @operation::text[]) AS k (t, p, r, o)
                  JOIN waiting x ON x.tenant_id = k.t AND x.account_period = k.p AND x.record_id = k.r AND x.operation = k.o
                 WHERE (SELECT tenants FROM live) IS NOT NULL AND k.t = ANY ((SELECT tenants FROM live)::text[])
                 UNION
                SELECT x.id
                  FROM unnest(@target_tenant_id::text[], @target_period::text[], @target_record_id::text[]) AS k (t, p, r)
                  JOIN waiting x ON x.tenant_id = k.t AND x.target_period = k.p AND x.target_record_id = k.r
                 WHERE (SELECT tenants FROM live) IS NOT NULL AND x.status <> 'applied'
                   AND k.t = ANY ((SELECT tenants FROM live)::text[]))
   AND w.status <> 'applied'
 ORDER BY w.id
   FOR UPDATE OF w;
