-- pushchat:no-transaction
-- A notification's status (GET /v1/notifications/ID) counts its push_queue rows. Built CONCURRENTLY, outside a
-- transaction, so a large queue keeps draining while it builds; chat rows (no notification_id) are not indexed.
CREATE INDEX CONCURRENTLY IF NOT EXISTS push_queue_notification_idx ON push_queue (notification_id)
    WHERE notification_id IS NOT NULL;
