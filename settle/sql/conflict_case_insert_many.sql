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
