-- name: ReconcileSequence :many
-- Accounts whose settlements do not carry the sequences 1..seq, each once:
-- every settlement that writes rows to an account takes its next sequence
-- number (stored in the identity's response), which the settlements
-- topic carries for finance to see a gap (tenant_id, '' = all). A
-- settlement is an identity that wrote rows to the account or whose
-- response announces a sequence on it: a settlement whose rows are gone
-- still counts, and the account's seq (its newest row's) then falls short.
WITH s AS (
    SELECT l.account_id, i.id, coalesce((i.response ->> 'sequence')::bigint, 0) AS seq
      FROM ledger_entries l
      JOIN identities i ON i.tenant_id = l.tenant_id AND i.id = l.identity_id
     WHERE (@tenant_id::text = '' OR l.tenant_id = @tenant_id)
    UNION
    SELECT i.account_id, i.id, (i.response ->> 'sequence')::bigint
      FROM identities i
     WHERE i.account_id IS NOT NULL AND i.response ->> 'sequence' IS NOT NULL
       AND (@tenant_id::text = '' OR i.tenant_id = @tenant_id)
)
SELECT a.id, a.tenant_id, a.subject, a.currency, a.seq,
       count(s.id) AS settlements, count(DISTINCT s.seq) AS sequences,
       coalesce(min(s.seq), 0)::bigint AS first_sequence, coalesce(max(s.seq), 0)::bigint AS last_sequence
  FROM account_states a
  LEFT JOIN s ON s.account_id = a.id
 WHERE (@tenant_id::text = '' OR a.tenant_id = @tenant_id)
 GROUP BY a.tenant_id, a.id, a.subject, a.currency, a.seq
HAVING count(s.id) <> a.seq OR count(DISTINCT s.seq) <> a.seq
    OR coalesce(min(s.seq), 1) <> 1 OR coalesce(max(s.seq), 0) <> a.seq
 ORDER BY a.id
 LIMIT 10000;
