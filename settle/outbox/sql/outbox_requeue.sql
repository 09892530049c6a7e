-- name: OutboxRequeue :exec
-- Leaves on a queue row only the outbox ids (@ids, in id order) still to
-- publish, when the broker took some of the messages it names and not the
-- others: those it took are not published again on every retry. The row
-- keeps its key, and so its place in the queue.
UPDATE outbox_queue SET ids = @ids::bigint[] WHERE id = @id AND tenant_id = @tenant_id;
