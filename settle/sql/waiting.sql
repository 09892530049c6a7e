-- name: WaitingDue :many
-- Waiting operations older than the orphan timeout, a page at a time;
-- skipped when another sweeper holds them.
SELECT w.tenant_id, w.account_period, w.record_id, w.operation
  FROM waiting w
 WHERE w.status = 'waiting' AND w.since < now() - (@older_than_ms::bigint) * interval '1 millisecond'
 ORDER BY w.id
 LIMIT @max_rows::integer
   FOR UPDATE SKIP LOCKED;

-- name: WaitingInsert :exec
INSERT INTO waiting (tenant_id, account_period, record_id, operation, target_period, target_record_id, fingerprint,
                     canonical, key, value, headers, topic, partition, "offset", response, status)
SELECT k.tenant_id, k.account_period, k.record_id, k.operation, k.target_period, k.target_record_id, k.fingerprint, k.canonical, k.key, k.value, k.headers, k.topic, k.partition, k."offset", k.response, k.status
  FROM unnest(@tenant_id::text[], @account_period::text[], @record_id::text[], @operation::text[], @target_period::text[], @target_record_id::text[], @fingerprint::bigint[],
                     @canonical::bytea[], @key::bytea[], @value::bytea[], @headers::jsonb[], @topic::text[], @partition::integer[], sqlc.arg('offset')::bigint[],
                     @response::json[], @status::text[])
       AS k (tenant_id, account_period, record_id, operation, target_period, target_record_id, fingerprint, canonical, key, value, headers, topic, partition, "offset", response, status);

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

-- name: WaitingUpdate :exec
UPDATE waiting w SET status = k.status, case_id = coalesce(nullif(k.case_id, 0), w.case_id)
  FROM unnest(@id::bigint[], @status::text[], @case_id::bigint[]) AS k (id, status, case_id)
 WHERE w.id = k.id;

-- name: WaitingWakeable :many
-- Targets that have settled while operations still wait for them: a page
-- of distinct target keys. In normal running a target's own transaction
-- applies its waiting operations; this finds what that missed.
SELECT DISTINCT w.tenant_id, w.target_period, w.target_record_id
  FROM waiting w
 WHERE w.status <> 'applied'
   AND EXISTS (SELECT 1
                 FROM identities i
                WHERE i.tenant_id = w.tenant_id AND i.account_period = w.target_period
                  AND i.record_id = w.target_record_id
                  AND i.operation NOT IN ('refund', 'reclaim', 'hold_release', 'expire', 'resolution')
                  AND i.outcome <> 'quarantined')
 LIMIT @max_rows::integer;
