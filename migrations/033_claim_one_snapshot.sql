-- A claim updates every row its scan locked (issue 43). The scans (push_queue_candidates, a VOLATILE function) each
-- read a fresh snapshot, later than the one the claim's update read when it was one statement with them: a row whose
-- transaction committed in between was found and locked by the scan, then not seen by the update, and the claim
-- returned without it while holding its lock to the end. The other claims meanwhile passed it over (SKIP LOCKED) and
-- moved their cursors past it, and its NOTIFY had already come: in the field bench a chat message now and then waited
-- for the daemon's claim from the start, once a minute (queued → claimed 43–50 s). Here the scans run as one statement
-- and the update as the next, whose snapshot is newer than every lock taken: a row locked is a row claimed.
--
-- Expand only: the same function, its arguments and columns unchanged; earlier releases call it as before.
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
DECLARE
    v_rows tid[];
    v_waiting bigint;
BEGIN
    WITH waiting AS (
        SELECT count(*) AS n FROM push_queue_candidates(p_app, p_platform, true, p_after_bulk, p_share)
    ), others AS (
        SELECT c AS ctid FROM push_queue_candidates(p_app, p_platform, false, p_after, greatest(0, p_others_limit - (SELECT n FROM waiting))) c
    ), broadcast AS (
        SELECT c AS ctid FROM push_queue_candidates(p_app, p_platform, true, p_after_bulk,
            least(p_bulk_cap, greatest(0, p_broadcast_limit - (SELECT count(*) FROM others)))) c
    )
    SELECT ARRAY(SELECT ctid FROM others UNION ALL SELECT ctid FROM broadcast), (SELECT n FROM waiting)
    INTO v_rows, v_waiting;
    RETURN QUERY
    UPDATE push_queue q
    SET claimed_by = p_instance, claimed_until = now() + make_interval(secs => p_lease_seconds), attempts = q.attempts + 1
    WHERE q.ctid = ANY(v_rows)
    RETURNING q.message_id, q.device_token, q.payload, q.priority, q.expiration, q.collapse_id, q.push_type, q.topic, q.time_queued,
        q.app, q.bulk, v_waiting;
END
$$;

COMMENT ON FUNCTION push_queue_claim IS
    'The push daemon''s claim: up to p_share rows kept for a waiting broadcast, the other rows after p_after, then a broadcast''s after p_after_bulk, locked (SKIP LOCKED) and leased to p_instance for p_lease_seconds; the update reads a snapshot newer than every lock, so each row locked is claimed. Returns the claimed rows, whether each is a broadcast''s, and how many were kept for a broadcast.';
