-- name: AccountKept :exec
-- Fails (40001: retry, reading them fresh) when an account whose kept
-- state the transaction used is gone, or, where @newest, has a newer row
-- than @entry_ids (settle_kept, migration 0017).
SELECT settle_kept(@tenant_ids::text[], @ids::bigint[], @entry_ids::bigint[], @newest::boolean[]);
