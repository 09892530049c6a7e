-- Accounts whose settlements do not carry the sequences 1..seq, each once:
-- every settlement that writes rows to an account takes its next sequence
-- number (stored in the identity's response), which the settlements
-- topic carries for finance to see a gap ($1: tenant, '' = all).
WITH s AS (
    SELECT DISTINCT l.account_id, i.id, coalesce((i.response ->> 'sequence')::bigint, 0) AS seq
      FROM ledger_entries l
      JOIN identities i ON i.tenant_id = l.tenant_id AND i.id = l.identity_id
     WHERE ($1 = '' OR l.tenant_id = $1)
)
SELECT a.id, a.tenant_id, a.subject, a.currency, a.seq,
       count(s.id), count(DISTINCT s.seq), coalesce(min(s.seq), 0), coalesce(max(s.seq), 0)
  FROM accounts a
  LEFT JOIN s ON s.account_id = a.id
 WHERE ($1 = '' OR a.tenant_id = $1)
 GROUP BY a.tenant_id, a.id
HAVING count(s.id) <> a.seq OR count(DISTINCT s.seq) <> a.seq
    OR coalesce(min(s.seq), 1) <> 1 OR coalesce(max(s.seq), 0) <> a.seq
 ORDER BY a.id
 LIMIT 10000
