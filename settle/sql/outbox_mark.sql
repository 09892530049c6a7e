-- Marks outbox rows published once the broker acknowledged them. Only rows
-- still unpublished are touched, so a second marking is harmless.
UPDATE outbox
   SET published_at = now()
 WHERE id = ANY ($1::bigint[])
   AND published_at IS NULL
