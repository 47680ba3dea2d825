-- The hot queue stays small (issue 31): rows the daemons are done with (sent, or failed for good) move from push_queue
-- to push_history, so the table the claims scan holds what waits and what is in flight, not days of history; retention
-- deletes from both. push_deliveries shows both as one, with each row's status, for psql and the API's status.
--
-- Expand only: the release before this one still runs on the schema (it stamps rows where they are, and reads only
-- push_queue). The daemons of this release move rows only once 019_push_history_contract.sql is applied (`migrate
-- --contract`, the guide's section 16): until then they stamp rows in place too, and a rollback sees every row.
CREATE TABLE push_history (LIKE push_queue INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING COMMENTS);
ALTER TABLE push_history ALTER COLUMN message_id DROP DEFAULT,
    ADD PRIMARY KEY (message_id),
    ADD CONSTRAINT push_history_done CHECK (time_sent IS NOT NULL OR time_failed IS NOT NULL);

COMMENT ON TABLE push_history IS
    'push_queue rows the daemons are done with, moved here when stamped sent (time_sent) or failed for good (time_failed, last_status, last_error): the same columns. Retention (queue prune) deletes them; push_deliveries shows them with the queue.';
COMMENT ON COLUMN push_history.message_id IS 'The row''s message id in push_queue: queue order, the identifier on the wire.';
COMMENT ON COLUMN push_history.claimed_by IS 'The daemon (host:pid) that sent or failed it.';
COMMENT ON COLUMN push_history.claimed_until IS 'Left as it was when the row was done (meaningless here).';

-- A notification's status counts its rows; retention deletes by age; the failures are listed by reason.
CREATE INDEX push_history_notification_idx ON push_history (notification_id) WHERE notification_id IS NOT NULL;
CREATE INDEX push_history_done_idx ON push_history ((coalesce(time_sent, time_failed)));
CREATE INDEX push_history_failed_idx ON push_history (last_status) WHERE time_failed IS NOT NULL;

CREATE VIEW push_deliveries AS
SELECT message_id, app, platform, device_token, notification_id, bulk,
       CASE WHEN time_sent IS NOT NULL THEN 'sent'
            WHEN time_failed IS NOT NULL THEN 'failed'
            WHEN claimed_by = 'retry-later' AND claimed_until > now() THEN 'retrying'
            WHEN claimed_until > now() THEN 'in flight'
            ELSE 'queued' END AS status,
       time_queued, time_sent, time_failed, attempts, last_status, last_error, claimed_by, claimed_until,
       payload, priority, expiration, collapse_id, push_type, topic
FROM push_queue
UNION ALL
SELECT message_id, app, platform, device_token, notification_id, bulk,
       CASE WHEN time_sent IS NOT NULL THEN 'sent' ELSE 'failed' END,
       time_queued, time_sent, time_failed, attempts, last_status, last_error, claimed_by, claimed_until,
       payload, priority, expiration, collapse_id, push_type, topic
FROM push_history;

COMMENT ON VIEW push_deliveries IS
    'Every notification row, waiting (push_queue) or done (push_history), with its status: queued, in flight (a daemon holds it), retrying (deferred after a retryable answer), sent or failed. For psql: SELECT status, count(*) FROM push_deliveries GROUP BY 1.';
COMMENT ON COLUMN push_deliveries.status IS
    'queued, in flight (claimed by a daemon, claimed_until ahead), retrying (deferred until claimed_until), sent (time_sent) or failed (time_failed; last_status and last_error say why, canceled for a canceled broadcast).';
