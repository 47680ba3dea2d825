-- The claim as a function whose update finds its rows by address whatever the statistics say (issue 43). The daemon
-- prepared its claim once per connection (a fifth of a claim's time was planning it), and PostgreSQL kept the generic
-- plan it made while the queue was nearly empty: the update's rows by a sequential scan. Under steady chat traffic
-- the queue fills with dead row versions between vacuums, and every claim then read every page of it (19,000 pages for
-- 1,000 rows in the field bench's profile; the chat figure lost a fifth). Here the same statement runs with sequential
-- scans off, so its kept plan finds the claimed rows by their addresses (a TID scan) and the candidates by the index
-- that gives their order, on a full queue as on an empty one. Its columns are the statement's own.
--
-- Expand only: a new function; earlier releases keep running their own statement.
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
    )
    UPDATE push_queue q
    SET claimed_by = p_instance, claimed_until = now() + make_interval(secs => p_lease_seconds), attempts = q.attempts + 1
    WHERE q.ctid = ANY(ARRAY(SELECT ctid FROM others UNION ALL SELECT ctid FROM broadcast))
    RETURNING q.message_id, q.device_token, q.payload, q.priority, q.expiration, q.collapse_id, q.push_type, q.topic, q.time_queued,
        q.app, q.bulk, (SELECT n FROM waiting);
END
$$;

COMMENT ON FUNCTION push_queue_claim IS
    'The push daemon''s claim: up to p_share rows kept for a waiting broadcast, the other rows after p_after, then a broadcast''s after p_after_bulk, locked (SKIP LOCKED) and leased to p_instance for p_lease_seconds. Returns the claimed rows, whether each is a broadcast''s, and how many were kept for a broadcast.';
