-- name: ReconcileWaitingTargetSettled :many
-- Operations still waiting (or orphaned) although a record they can take
-- as their target has settled (tenant_id, '' = all). The sweep applies
-- them; one found here was missed by its target's transaction.
SELECT w.tenant_id, w.account_period, w.record_id, w.operation, w.target_period, w.target_record_id, w.status
  FROM waiting w
 WHERE w.status <> 'applied'
   AND (@tenant_id::text = '' OR w.tenant_id = @tenant_id)
   AND EXISTS (SELECT 1
                 FROM identities i
                WHERE i.tenant_id = w.tenant_id AND i.account_period = w.target_period
                  AND i.record_id = w.target_record_id
                  AND i.operation NOT IN ('refund', 'reclaim', 'hold_release', 'expire', 'resolution')
                  AND i.outcome <> 'quarantined')
 ORDER BY w.id
 LIMIT 10000;
