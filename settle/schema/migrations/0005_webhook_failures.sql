-- settle schema, version 5: webhook deliveries count their failed attempts.
--
-- attempts counts the sends started (an attempt renews its lease and counts
-- its send right before the POST). failures counts the attempts that
-- finished and failed: a non-2xx answer, or none within the request
-- timeout. --webhook-attempts-max bounds failures, so an attempt whose
-- POST was answered 2xx but whose result was never written (it crashed
-- first) does not use up the delivery: the attempt that takes it over sends
-- it again. attempts - failures - (1 once done) is the number of such sends.
--
-- Rows still open keep the bound they had: attempts counted claims, each of
-- which ended in a failure except the one in flight.
ALTER TABLE webhook_deliveries ADD COLUMN failures integer NOT NULL DEFAULT 0;
UPDATE webhook_deliveries
   SET failures = CASE status WHEN 'pending' THEN attempts ELSE greatest(attempts - 1, 0) END
 WHERE status IN ('pending', 'in_flight');
GRANT UPDATE (failures) ON webhook_deliveries TO settle_app;

CREATE OR REPLACE VIEW webhook_dead_letters AS
SELECT id, tenant_id, settlement_id, outbox_id, attempts, last_status, last_error, created_at, done_at AS dead_at, failures
  FROM webhook_deliveries
 WHERE status = 'dead';
