-- name: WebhookSubscribe :exec
-- Delivers the outbox rows of a topic by webhook from now on (see the
-- trigger outbox_webhook_enqueue).
INSERT INTO webhook_subscriptions (topic) VALUES (@topic)
    ON CONFLICT (topic) DO NOTHING;

-- name: WebhookSubscription :many
-- Whether the outbox rows of @topic are queued for webhook delivery (a row,
-- since when) and how many deliveries wait to be sent (pending or in
-- flight, webhook_deliveries_due and _leased).
SELECT s.created_at,
       (SELECT count(*) FROM webhook_deliveries d WHERE d.status IN ('pending', 'in_flight'))::bigint AS waiting
  FROM webhook_subscriptions s
 WHERE s.topic = @topic;
