-- name: WebhookSubscribe :exec
-- Delivers the outbox rows of a topic by webhook from now on (see the
-- trigger outbox_webhook_enqueue).
INSERT INTO webhook_subscriptions (topic) VALUES (@topic)
    ON CONFLICT (topic) DO NOTHING;
