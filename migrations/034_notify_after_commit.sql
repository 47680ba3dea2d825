-- A NOTIFY serialises commits (issue 43): PostgreSQL takes one lock per database for every transaction that notified
-- and holds it until that transaction's commit is on disk, so those transactions flush the WAL one after the other
-- and never share a flush. Every chat message notified from its insert: in the field bench, at 300 messages a
-- second, four to five of the API's statements at any moment waited for that lock (the broadcast's expansions, which
-- notified too, held it through their much larger flushes), and the API's commits could not be grouped.
-- A statement that queues rows may now say the wakeup comes after its commit: `pushchat.notify` set to
-- 'after_commit' for its transaction (set_config(..., true)) and the trigger does not notify; the writer then sends
-- `pg_notify('push_queue', lowest)` itself, in a transaction of its own that commits without waiting for the disk
-- (a wakeup lost in a crash of PostgreSQL is found by the daemons' claims after they reconnect). Any other insert
-- (psql, an earlier release) notifies as before.
--
-- Expand only: the same trigger and payload; the release before this one never sets the variable.
CREATE OR REPLACE FUNCTION push_queue_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    lowest bigint;
BEGIN
    IF current_setting('pushchat.notify', true) = 'after_commit' THEN
        RETURN NULL;
    END IF;
    SELECT min(message_id) INTO lowest FROM queued;
    IF lowest IS NOT NULL THEN
        PERFORM pg_notify('push_queue', lowest::text);
    END IF;
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION push_queue_notify() IS
    'Wakes listeners on channel push_queue after rows are queued, once per statement; the payload is the lowest message id queued. Silent in a transaction that set pushchat.notify to after_commit: its writer notifies after the commit.';
