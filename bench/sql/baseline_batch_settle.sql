-- Batched baseline: a batch's identities claimed with their responses and,
-- for the ones it claimed (new), their ledger and outbox rows, in one
-- statement. The caller sends each identity once per batch.
WITH input AS (
    SELECT *
      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bytea[], $7::json[],
                  $8::text[], $9::numeric[], $10::bytea[])
           AS i (tenant_id, account_period, record_id, operation, fingerprint, canonical, response, account, amount, key)
), claimed AS (
    INSERT INTO bl_identities (tenant_id, account_period, record_id, operation, fingerprint, canonical, response)
    SELECT tenant_id, account_period, record_id, operation, fingerprint, canonical, response FROM input
    ON CONFLICT ON CONSTRAINT bl_identities_scope_key DO NOTHING
    RETURNING id, tenant_id, account_period, record_id, operation
), claimed_input AS (
    SELECT c.id, i.account, i.amount, i.key, i.response
      FROM claimed c
      JOIN input i USING (tenant_id, account_period, record_id, operation)
), ledger AS (
    INSERT INTO bl_ledger (identity_id, account, amount)
    SELECT id, account, amount FROM claimed_input
)
INSERT INTO bl_outbox (topic, key, value)
SELECT 'settlements', key, convert_to(response::text, 'UTF8') FROM claimed_input
