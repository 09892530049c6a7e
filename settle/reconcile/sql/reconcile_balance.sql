-- name: ReconcileBalance :many
-- Accounts whose balance or held (the state their newest ledger row
-- carries, account_states) differs from the sum of their ledger rows
-- (tenant_id, '' = all).
SELECT a.id, a.tenant_id, a.subject, a.currency,
       a.balance::text AS balance, a.held::text AS held,
       coalesce(s.balance, 0)::text AS rows_balance, coalesce(s.held, 0)::text AS rows_held
  FROM account_states a
  LEFT JOIN (SELECT account_id,
                    sum(amount) FILTER (WHERE bucket = 'balance') AS balance,
                    sum(amount) FILTER (WHERE bucket = 'held')    AS held
               FROM ledger_entries
              GROUP BY account_id) s ON s.account_id = a.id
 WHERE (@tenant_id::text = '' OR a.tenant_id = @tenant_id)
   AND (a.balance <> coalesce(s.balance, 0) OR a.held <> coalesce(s.held, 0))
 ORDER BY a.id;
