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
