-- Accounts whose cached balance or held differs from the sum of their
-- ledger rows ($1: tenant, '' = all).
SELECT a.id, a.tenant_id, a.subject, a.currency,
       a.balance::text, a.held::text,
       coalesce(s.balance, 0)::text, coalesce(s.held, 0)::text
  FROM accounts a
  LEFT JOIN (SELECT account_id,
                    sum(amount) FILTER (WHERE bucket = 'balance') AS balance,
                    sum(amount) FILTER (WHERE bucket = 'held')    AS held
               FROM ledger_entries
              GROUP BY account_id) s ON s.account_id = a.id
 WHERE ($1 = '' OR a.tenant_id = $1)
   AND (a.balance <> coalesce(s.balance, 0) OR a.held <> coalesce(s.held, 0))
 ORDER BY a.id
