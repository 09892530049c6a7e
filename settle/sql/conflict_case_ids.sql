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
