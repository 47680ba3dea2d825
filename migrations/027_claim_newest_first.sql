-- The claim's rows newest first (issue 43): the daemon keeps two claims under way on a connection while a backlog
-- drains, the second started once the first's rows arrive (the function returns them only once all are locked and
-- leased). Its first row is the newest it took, so the second claim starts its scan past the first's rows instead of
-- walking again over every one of them (with three daemons sharing the queue, each claim walked past the locked rows
-- of five others). The daemon sorts the rows it claimed; earlier releases do too.
--
-- Expand only: the same function, its rows in another order.
CREATE OR REPLACE FUNCTION push_queue_claim(
    p_app text, p_platform text, p_after bigint, p_after_bulk bigint, p_share bigint, p_others_limit bigint,
    p_bulk_cap bigint, p_broadcast_limit bigint, p_instance text, p_lease_seconds double precision
)
RETURNS TABLE (
    message_id bigint, device_token text, payload text, priority smallint, expiration timestamptz, collapse_id text,
    push_type text, topic text, time_queued timestamptz, app text, bulk boolean, reserved bigint
)
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH waiting AS (
        SELECT count(*) AS n FROM push_queue_candidates(p_app, p_platform, true, p_after_bulk, p_share)
    ), others AS (
        SELECT c AS ctid FROM push_queue_candidates(p_app, p_platform, false, p_after, greatest(0, p_others_limit - (SELECT n FROM waiting))) c
    ), broadcast AS (
        SELECT c AS ctid FROM push_queue_candidates(p_app, p_platform, true, p_after_bulk,
            least(p_bulk_cap, greatest(0, p_broadcast_limit - (SELECT count(*) FROM others)))) c
    ), claimed AS (
        UPDATE push_queue q
        SET claimed_by = p_instance, claimed_until = now() + make_interval(secs => p_lease_seconds), attempts = q.attempts + 1
        WHERE q.ctid = ANY(ARRAY(SELECT ctid FROM others UNION ALL SELECT ctid FROM broadcast))
        RETURNING q.message_id, q.device_token, q.payload, q.priority, q.expiration, q.collapse_id, q.push_type, q.topic,
            q.time_queued, q.app, q.bulk, (SELECT n FROM waiting) AS reserved
    )
    SELECT * FROM claimed ORDER BY message_id DESC;
END
$$;

COMMENT ON FUNCTION push_queue_claim IS
    'The push daemon''s claim: up to p_share rows kept for a waiting broadcast, the other rows after p_after, then a broadcast''s after p_after_bulk, locked (SKIP LOCKED) and leased to p_instance for p_lease_seconds. Returns the claimed rows newest first, whether each is a broadcast''s, and how many were kept for a broadcast.';
