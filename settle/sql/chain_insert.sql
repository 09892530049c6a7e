INSERT INTO chains (root_id, tenant_id, account_id, net_charge, version, refund_id, refunded, reclaim_id, recovered)
SELECT k.root_id, k.tenant_id, k.account_id, k.net_charge, k.version, nullif(k.refund_id, 0), nullif(k.refunded, '')::numeric,
       nullif(k.reclaim_id, 0), k.recovered
  FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[]::numeric[], $5::bigint[], $6::bigint[], $7::text[],
              $8::bigint[], $9::boolean[])
       AS k (root_id, tenant_id, account_id, net_charge, version, refund_id, refunded, reclaim_id, recovered)
