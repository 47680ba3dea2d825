-- The rows a claim takes, found by one plan whatever the statistics say (issue 31). A claim of chat rows while a
-- million of a broadcast's rows wait must walk (app, platform, bulk, message_id) from its cursor; with statistics from
-- before the broadcast (or none: the pending rows are mostly a broadcast's while the table is mostly sent chat) the
-- planner walked the pending rows by message_id instead and skipped every broadcast row, 100 to 300 ms per claim. Inside
-- this function the planner may not sort (the range on bulk keeps bulk in the order), so the index that gives the order
-- is the plan. Locks what it returns (SKIP LOCKED); the claim updates those rows. Expand only: nothing else changes.
CREATE FUNCTION push_queue_candidates(p_app text, p_platform text, p_bulk boolean, p_after bigint, p_limit bigint)
RETURNS SETOF tid
LANGUAGE sql VOLATILE
SET enable_sort = off
AS $$
    SELECT ctid FROM push_queue
    WHERE time_sent IS NULL AND time_failed IS NULL AND claimed_until IS NULL AND app = p_app AND platform = p_platform
        AND bulk >= p_bulk AND bulk <= p_bulk AND message_id > p_after
    ORDER BY bulk, message_id
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
$$;

COMMENT ON FUNCTION push_queue_candidates(text, text, boolean, bigint, bigint) IS
    'Up to p_limit pending, unclaimed rows of one app, platform and kind (bulk: a broadcast''s) after message id p_after, oldest first, locked: what the push daemon''s claim takes.';
