-- How many outbox rows wait to be published, and since when.
SELECT count(*), coalesce(min(o.created_at), now())
  FROM outbox_queue q
  JOIN outbox o ON o.id = q.id
