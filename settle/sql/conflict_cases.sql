-- name: ConflictCaseClose :exec
-- Closes orphan cases whose operation was applied when its target arrived.
-- A case is open exactly while its closed_at is NULL (this statement and
-- conflict_case_resolve.sql set both). That, not status = 'open', is the
-- condition: status leads conflict_cases_status_opened, and a generic plan
-- made on an empty table scanned that index's every open case for each
-- close instead of probing the primary key by id.
UPDATE conflict_cases SET status = 'auto_resolved', closed_at = now()
 WHERE id = ANY (@ids::bigint[]) AND closed_at IS NULL;

-- name: ConflictCaseIDs :batchmany
-- The ids of the cases named by their keys (identity, reason, incoming
-- fingerprint), one probe of conflict_cases_key each, in the order given
-- (n from 1): the cases conflict_case_insert_many.sql opened or found just
-- before, in the same transaction. 0 for a key with no case (a concurrent
-- opener's row this statement cannot see: the caller retries the batch).
SELECT k.n::bigint AS n, coalesce(c.id, 0)::bigint AS id
  FROM unnest(@tenant_id::text[], @account_period::text[], @record_id::text[], @operation::text[],
              @reason::text[], @incoming_fingerprint::bigint[])
       WITH ORDINALITY AS k (tenant_id, account_period, record_id, operation, reason, incoming_fingerprint, n)
  LEFT JOIN LATERAL (SELECT c.id FROM conflict_cases c
                      WHERE c.tenant_id = k.tenant_id AND c.account_period = k.account_period
                        AND c.record_id = k.record_id AND c.operation = k.operation AND c.reason = k.reason
                        AND c.incoming_fingerprint = k.incoming_fingerprint LIMIT 1) c ON true
 ORDER BY k.n;

-- name: ConflictCaseInsertMany :exec
-- Opens conflict cases, one per row of the arrays (settle.openCases: a
-- batch's fingerprint mismatches, a rule-based quarantine, an orphan, a
-- reused Idempotency-Key's record); a case already there for the same
-- identity, reason and incoming payload is left as it is
-- (conflict_case_ids.sql, sent after it in the same round trip, reads every
-- one's id).
INSERT INTO conflict_cases (tenant_id, account_period, record_id, operation, reason, incoming_fingerprint,
                            identity_id, stored_canonical, incoming_canonical, diff, detail,
                            topic, partition, "offset")
SELECT k.tenant_id, k.account_period, k.record_id, k.operation, k.reason, k.incoming_fingerprint,
       nullif(k.identity_id, 0), k.stored_canonical, k.incoming_canonical, k.diff, k.detail,
       k.topic, k.partition, k."offset"
  FROM unnest(@tenant_id::text[], @account_period::text[], @record_id::text[], @operation::text[],
              @reason::text[], @incoming_fingerprint::bigint[], @identity_id::bigint[],
              @stored_canonical::bytea[], @incoming_canonical::bytea[], @diff::jsonb[], @detail::text[],
              @topic::text[], @partition::integer[], sqlc.arg('offset')::bigint[])
       WITH ORDINALITY AS k (tenant_id, account_period, record_id, operation, reason, incoming_fingerprint,
                             identity_id, stored_canonical, incoming_canonical, diff, detail, topic, partition,
                             "offset", n)
 ORDER BY k.n
    ON CONFLICT ON CONSTRAINT conflict_cases_key DO NOTHING;

-- name: ConflictCaseLock :one
-- Locks a case for resolution and reads it with its resolution, if any.
SELECT c.tenant_id, c.account_period, c.record_id, c.operation, c.reason, c.status,
       c.incoming_canonical, c.topic, c.partition, c."offset",
       coalesce(r.decision, ''), coalesce(i.settlement_id, ''), i.response
  FROM conflict_cases c
  LEFT JOIN case_resolutions r ON r.tenant_id = c.tenant_id AND r.case_id = c.id
  LEFT JOIN identities i ON i.tenant_id = r.tenant_id AND i.id = r.identity_id
 WHERE c.id = @id
   FOR UPDATE OF c;

-- name: ConflictCaseResolve :exec
UPDATE conflict_cases SET status = @status, closed_at = now() WHERE id = @id AND status = 'open';
