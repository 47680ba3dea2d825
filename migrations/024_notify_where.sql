-- The NOTIFY of an insert says where its rows are (issue 43): the lowest message id the statement queued. A daemon's
-- claim cursor moves past the rows it claimed, so a row that becomes claimable behind it (an insert whose transaction
-- committed after later ones, rows given back, leases run out: those say so too) was found only by a claim from the
-- start of the queue, at least every second; with an operator's snapshot held open, each such claim walked every row
-- claimed since the snapshot, and that was the whole cost of the snapshot (docs/BENCHMARKS.md). With the id in the
-- NOTIFY the daemons rewind their cursors to it, and a claim from the start is only a safety net, once a minute.
-- A statement that queued nothing no longer notifies.
--
-- Expand only: the release before this one ignores the payload.
CREATE OR REPLACE FUNCTION push_queue_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    lowest bigint;
BEGIN
    SELECT min(message_id) INTO lowest FROM queued;
    IF lowest IS NOT NULL THEN
        PERFORM pg_notify('push_queue', lowest::text);
    END IF;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION push_queue_notify() IS
    'Wakes listeners on channel push_queue after rows are queued, once per statement; the payload is the lowest message id queued.';

DROP TRIGGER push_queue_notify_insert ON push_queue;
CREATE TRIGGER push_queue_notify_insert
    AFTER INSERT ON push_queue
    REFERENCING NEW TABLE AS queued
    FOR EACH STATEMENT EXECUTE FUNCTION push_queue_notify();
