-- How many outbox rows wait to be published, and since when.
SELECT count(*), coalesce(min(created_at), now())
  FROM outbox
 WHERE published_at IS NULL
