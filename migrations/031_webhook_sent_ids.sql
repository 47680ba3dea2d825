-- notification.sent events stored as the ids of their push_history rows (issue 45: a broadcast with notification.sent
-- events must drain at 90% of its rate without). Building each event's JSON in the result statement and writing it
-- (about 300 bytes an event, compressed, out of line, to the WAL) cost PostgreSQL 9–17 µs an event while the broadcast
-- drained; the ids cost 8 bytes each. The deliverer builds the events from push_history when it claims the row to POST
-- it: held back while a broadcast drains at full speed (webhook_broadcast_lag), so after the drain, not in it.
--
-- Step one of two (expand): the column, and the function the deliverer's claim builds the events with. Rows still carry
-- their events as text (the release before this one reads only that) until 032_webhook_sent_ids_contract.sql makes the
-- result statements write ids (`migrate --contract`; a fresh database gets it at once). This release's claim reads both.

ALTER TABLE webhook_outbox ADD COLUMN sent_ids bigint[];

COMMENT ON COLUMN webhook_outbox.sent_ids IS
    'notification.sent events by the message_id of their push_history row, in order (events is NULL then): the claim builds the POST''s events from them (webhook_sent_events(sent_ids) in psql). queue prune keeps the push_history rows a waiting POST names.';

-- The ids are written once and read once per POST; up to 1,000 of them (8 kB) compress to about half with lz4 and stay
-- in the row's page (MAIN), so writing them adds no TOAST rows.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE webhook_outbox ALTER COLUMN sent_ids SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value OR syntax_error THEN
    NULL;  -- A PostgreSQL built without lz4: pglz.
END $$;
ALTER TABLE webhook_outbox ALTER COLUMN sent_ids SET STORAGE MAIN;

-- The events of `ids` (push_history rows stamped sent), as the JSON array 028's trigger wrote for them, byte for byte.
-- A row no longer in push_history (deleted by hand: queue prune keeps those a waiting POST names) has no event.
CREATE FUNCTION webhook_sent_events(ids bigint[]) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce('[' || string_agg(
        concat(
            '{"id":"evt_', d.message_id, '_sent","type":"notification.sent","timestamp":',
            left(to_json(d.time_sent AT TIME ZONE 'UTC')::text, -1), 'Z","data":{',
            '"notification_id":"' || d.notification_id || '",', '"message_id":', d.message_id,
            CASE WHEN (d.app || d.platform || d.device_token) !~ '[\x01-\x1f"\\]'
                 THEN concat(',"app":"', d.app, '","platform":"', d.platform, '","token":"', d.device_token, '"')
                 ELSE concat(',"app":', to_json(d.app), ',"platform":', to_json(d.platform), ',"token":', to_json(d.device_token))
            END,
            ',"status":"sent","attempts":', d.attempts, '}}'
        ), ',' ORDER BY d.message_id) || ']', '[]')
    FROM push_history d
    WHERE d.message_id = ANY (ids) AND d.time_sent IS NOT NULL
$$;

COMMENT ON FUNCTION webhook_sent_events(bigint[]) IS
    'The notification.sent events of these push_history rows, as a JSON array (text): what a webhook_outbox row with sent_ids POSTs.';
