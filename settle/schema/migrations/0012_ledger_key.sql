-- settle schema, version 12: a ledger row is keyed by its account.
--
-- The ledger had two indexes that lead with what no query asks by alone:
-- the primary key (tenant_id, id), which no statement looks a row up by,
-- and ledger_entries_account (account_id, id), which every read of an
-- account's rows uses (statements, balances, the hash chain, an account's
-- settlements) with its tenant beside it. One key serves both: the primary
-- key (tenant_id, account_id, id), the tenant first as a distributed
-- PostgreSQL (Citus) and hash partitioning by tenant require, an account's
-- rows in the order they were written. One index less to write per ledger
-- row (TestWALPerTable). ledger_entries_identity stays: explain and the
-- checker read a settlement's rows by its identity.
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_pkey,
                           ADD CONSTRAINT ledger_entries_pkey PRIMARY KEY (tenant_id, account_id, id);
DROP INDEX ledger_entries_account;
