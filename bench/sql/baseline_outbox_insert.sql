-- Per-record baseline: the record's outbox row.
INSERT INTO bl_outbox (topic, key, value) VALUES ($1, $2, $3)
