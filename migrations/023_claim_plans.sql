-- The claim's candidates with their plan kept (issue 43). push_queue_candidates was a SQL function with a SET clause:
-- PostgreSQL never inlines such a function and, before version 18, plans its query again at every call. A claim calls
-- it three times, so a claim spent more time planning than finding its rows (a profile of PostgreSQL in the field
-- bench: 39 µs of planning per call, 22,992 calls in 30 s of chat). In PL/pgSQL the query is planned once per session
-- and kept; the plan is the same (sorting still off, so the index that gives the order is the plan).
--
-- Expand only: the same signature and the same rows, so the release before this one calls it as it is.
CREATE OR REPLACE FUNCTION push_queue_candidates(p_app text, p_platform text, p_bulk boolean, p_after bigint, p_limit bigint)
RETURNS SETOF tid
LANGUAGE plpgsql VOLATILE
SET enable_sort = off
AS $$
BEGIN
    RETURN QUERY
    SELECT q.ctid FROM push_queue q
    WHERE q.time_sent IS NULL AND q.time_failed IS NULL AND q.claimed_until IS NULL AND q.app = p_app AND q.platform = p_platform
        AND q.bulk >= p_bulk AND q.bulk <= p_bulk AND q.message_id > p_after
    ORDER BY q.bulk, q.message_id
    LIMIT p_limit
    FOR UPDATE OF q SKIP LOCKED;
END
$$;
