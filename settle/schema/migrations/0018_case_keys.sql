-- settle schema, version 18: conflict cases and their resolutions are
-- keyed (id, tenant_id), as the other tables looked up by a natural key
-- have been since version 10.
--
-- A settling transaction that opens cases reads their ids back by the
-- cases' natural key (conflict_case_ids.sql, conflict_cases_key). Its
-- plan is the generic one, made once per connection (db.ProbesOnly), on
-- whatever the table held then: made on an empty table it probed the
-- primary key (tenant_id, id) on tenant_id alone and filtered the rest,
-- reading the tenant's every case for each case it looked up. Seen in the
-- growth bench (settle bench --only growth --growth-identities 10000000):
-- with ≈ 120,000 cases that statement was most of PostgreSQL's time and the
-- rate fell to a third of the first million's. Keyed (id, tenant_id), the
-- primary key serves the look-ups by id (the plain index on id goes: one
-- index less to write per case) and cannot serve one by a natural key. The
-- same for case_resolutions, looked up by its case (case_resolutions_case_key).
-- The tenant stays in every key and the foreign key still names
-- (tenant_id, id), as a distribution by tenant requires.
ALTER TABLE case_resolutions DROP CONSTRAINT case_resolutions_case_id_fkey;
ALTER TABLE conflict_cases   DROP CONSTRAINT conflict_cases_pkey,
                             ADD CONSTRAINT conflict_cases_pkey PRIMARY KEY (id, tenant_id);
DROP INDEX conflict_cases_id;
ALTER TABLE case_resolutions DROP CONSTRAINT case_resolutions_pkey,
                             ADD CONSTRAINT case_resolutions_pkey PRIMARY KEY (id, tenant_id),
                             ADD CONSTRAINT case_resolutions_case_id_fkey FOREIGN KEY (tenant_id, case_id)
                                 REFERENCES conflict_cases (tenant_id, id);
