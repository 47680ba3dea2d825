-- pushchat:no-transaction
-- Each app's pending rows in queue order, so one app's claims never walk another's backlog (fairness between apps,
-- issue 29). Built CONCURRENTLY, outside a transaction, so a running queue keeps draining; safe to run again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS push_queue_app_pending_idx ON push_queue (app, message_id)
    WHERE time_sent IS NULL AND time_failed IS NULL;
