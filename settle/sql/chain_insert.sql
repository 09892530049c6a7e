-- name: ChainInsert :exec
INSERT INTO chains (root_id, tenant_id, account_id, net_charge, version, refund_id, refunded, reclaim_id, recovered)
SELECT k.root_id, k.tenant_id, k.account_id, k.net_charge, k.version, nullif(k.refund_id, 0), nullif(k.refunded, '')::numeric,
       nullif(k.reclaim_id, 0), k.recovered
  FROM unnest(@root_id::bigint[], @tenant_id::text[], @account_id::bigint[], (@net_charge::text[])::numeric[], @version::bigint[], @refund_id::bigint[], @refunded::text[],
              @reclaim_id::bigint[], @recovered::boolean[])
       AS k (root_id, tenant_id, account_id, net_charge, version, refund_id, refunded, reclaim_id, recovered);
