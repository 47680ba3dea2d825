-- pushchat:no-transaction
-- Each app's pending rows per platform in queue order: the APNs and FCM senders of one app claim their own rows without
-- walking the other's backlog. Built CONCURRENTLY, outside a transaction, so a running queue keeps draining; an index a
-- failed build left invalid is built again.
DROP INDEX CONCURRENTLY IF EXISTS push_queue_lane_pending_idx;
CREATE INDEX CONCURRENTLY push_queue_lane_pending_idx ON push_queue (app, platform, message_id)
    WHERE time_sent IS NULL AND time_failed IS NULL;
