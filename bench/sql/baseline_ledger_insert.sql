-- Per-record baseline: the record's ledger row.
INSERT INTO bl_ledger (identity_id, account, amount) VALUES ($1, $2, $3::numeric)
