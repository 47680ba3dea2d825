-- pushchat:no-transaction
-- Each lane's pending rows, other rows before a broadcast's (bulk): a claim takes chat and single notifications first and
-- fills the rest of its batch from the broadcast, each from its own cursor, without walking the other's backlog. Chat
-- rooms (the broadcast's chat phase) are walked by room and token. Built CONCURRENTLY, outside a transaction, so a
-- running queue keeps draining; an index a failed build left invalid is built again.
DROP INDEX CONCURRENTLY IF EXISTS push_queue_bulk_pending_idx;
CREATE INDEX CONCURRENTLY push_queue_bulk_pending_idx ON push_queue (app, platform, bulk, message_id)
    WHERE time_sent IS NULL AND time_failed IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS active_users_room_token_idx;
CREATE INDEX CONCURRENTLY active_users_room_token_idx ON active_users (secret_code, device_token);
