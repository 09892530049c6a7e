-- name: IdentityInsert :exec
-- The identities first seen in a small batch, in the batch's last pipeline
-- (a group of the HTTP edge, a quiet stream): the rows identity_copy.sql
-- writes with COPY, whose statement and two round trips cost more than a
-- few rows. Null columns come as 0 or ''. A concurrent claim of the same
-- identity fails it on identities_scope_key, as the COPY would.
INSERT INTO identities (id, tenant_id, account_period, record_id, operation, fingerprint,
                        canonical_version, canonical, outcome, reason, response, settlement_id,
                        account_id, root_id, source, attributes, topic, partition, "offset",
                        first_seen_at, last_attempted_at, attempts, subject, currency, target_id)
SELECT k.id, k.tenant_id, k.account_period, k.record_id, k.operation, k.fingerprint, k.canonical_version, k.canonical,
       k.outcome, k.reason, k.response, nullif(k.settlement_id, ''), nullif(k.account_id, 0), nullif(k.root_id, 0),
       k.source, k.attributes, k.topic, k.partition, k."offset", @first_seen_at::timestamptz,
       @last_attempted_at::timestamptz, @attempts::integer, k.subject, k.currency, nullif(k.target_id, 0)
  FROM unnest(@id::bigint[], @tenant_id::text[], @account_period::text[], @record_id::text[], @operation::text[],
              @fingerprint::bigint[], @canonical_version::smallint[], @canonical::bytea[], @outcome::text[],
              @reason::text[], @response::json[], @settlement_id::text[], @account_id::bigint[], @root_id::bigint[],
              @source::text[], @attributes::jsonb[], @topic::text[], @partition::integer[], sqlc.arg('offset')::bigint[],
              @subject::text[], @currency::text[], @target_id::bigint[])
       AS k (id, tenant_id, account_period, record_id, operation, fingerprint, canonical_version, canonical, outcome,
             reason, response, settlement_id, account_id, root_id, source, attributes, topic, partition, "offset",
             subject, currency, target_id);
