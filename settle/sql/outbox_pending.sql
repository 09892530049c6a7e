-- The oldest unpublished outbox rows, in id order (the order their
-- transactions wrote them), for the relay that holds the outbox lease.
-- Served by the partial index outbox_unpublished.
SELECT id, topic, key, value, headers
  FROM outbox_messages
 WHERE published_at IS NULL
 ORDER BY id
 LIMIT $1
