-- pushchat:contract
-- Step two of two (contract; 031_webhook_sent_ids.sql is step one): the result statements write notification.sent
-- events as the ids of their push_history rows (webhook_outbox.sent_ids, events NULL), and the deliverer's claim builds
-- the events from them. In the field bench (a broadcast to 1,000,000 devices with notification.sent events) building
-- and writing each event's JSON in the result statement cost PostgreSQL 9–17 µs an event during the drain. The events
-- POSTed are the same, byte for byte. Applied by `pushchat-api migrate --contract` only (a fresh database gets it at
-- once): a release from before 031 reads every outbox row's events as text and would fail on these rows (the guide's
-- section 16). Undone by hand: `UPDATE webhook_outbox SET events = webhook_sent_events(sent_ids), sent_ids = NULL
-- WHERE sent_ids IS NOT NULL`, 028's webhook_outbox_write() and constraint again, then `DELETE FROM
-- schema_migrations WHERE version = 32`.

ALTER TABLE webhook_outbox ALTER COLUMN events DROP NOT NULL,
    DROP CONSTRAINT webhook_outbox_events,
    ADD CONSTRAINT webhook_outbox_events CHECK (
        event_count BETWEEN 1 AND 1000
        AND CASE WHEN events IS NOT NULL THEN left(events, 1) = '[' AND sent_ids IS NULL
                 ELSE cardinality(sent_ids) = event_count END
    );

COMMENT ON COLUMN webhook_outbox.events IS
    'The events, a JSON array as text, sent as it is (the body is {"events": …}); each event''s id is stable across retries. events::json in psql. NULL for notification.sent events, kept as sent_ids.';

-- Events of one statement's rows: one outbox row per webhook and 1,000 events. `kind`: 'done' (push_history rows: sent
-- or failed) or 'tokens' (invalid_tokens rows: device.unregistered).
CREATE OR REPLACE FUNCTION webhook_outbox_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Without an enabled webhook a result costs one probe of a tiny table.
    IF NOT EXISTS (SELECT 1 FROM webhooks WHERE disabled_at IS NULL) THEN
        RETURN NULL;
    END IF;
    IF TG_ARGV[0] = 'done' THEN
        -- notification.sent: the rows' ids, in order, up to 1,000 per outbox row (the deliverer's claim builds the
        -- events: webhook_sent_events). One sort, no window: each webhook's ids in one array, then cut.
        INSERT INTO webhook_outbox (webhook_id, sent_ids, event_count)
        SELECT a.webhook_id, a.ids[i * 1000 + 1 : i * 1000 + 1000], least(cardinality(a.ids) - i * 1000, 1000)
        FROM (
            SELECT w.id AS webhook_id, array_agg(d.message_id ORDER BY d.message_id) AS ids
            FROM done_rows d
            JOIN webhooks w ON w.app = d.app AND w.disabled_at IS NULL AND 'notification.sent' = ANY (w.events)
                AND (d.notification_id IS NOT NULL OR 'chat' = ANY (w.events))
            WHERE d.time_sent IS NOT NULL
            GROUP BY w.id
        ) a
        CROSS JOIN generate_series(0, (cardinality(a.ids) - 1) / 1000) i;

        -- notification.failed: the events as text, as 028 wrote them (few, and `queue purge` may delete failed rows
        -- before their POST).
        INSERT INTO webhook_outbox (webhook_id, events, event_count)
        SELECT webhook_id, '[' || string_agg(event, ',' ORDER BY ord) || ']', count(*)
        FROM (
            SELECT w.id AS webhook_id, d.message_id AS ord,
                   (row_number() OVER (PARTITION BY w.id ORDER BY d.message_id) - 1) / 1000 AS part,
                   concat(
                       '{"id":"evt_', d.message_id, '_failed","type":"notification.failed","timestamp":',
                       left(to_json(d.time_failed AT TIME ZONE 'UTC')::text, -1), 'Z","data":{',
                       '"notification_id":"' || d.notification_id || '",', '"message_id":', d.message_id,
                       CASE WHEN (d.app || d.platform || d.device_token) !~ '[\x01-\x1f"\\]'
                            THEN concat(',"app":"', d.app, '","platform":"', d.platform, '","token":"', d.device_token, '"')
                            ELSE concat(',"app":', to_json(d.app), ',"platform":', to_json(d.platform), ',"token":', to_json(d.device_token))
                       END,
                       ',"status":', to_json(coalesce(d.last_status, 'failed')), ',"reason":', to_json(coalesce(d.last_error, 'failed')),
                       ',"attempts":', d.attempts, '}}'
                   ) AS event
            FROM done_rows d
            JOIN webhooks w ON w.app = d.app AND w.disabled_at IS NULL AND 'notification.failed' = ANY (w.events)
                AND (d.notification_id IS NOT NULL OR 'chat' = ANY (w.events))
            WHERE d.time_sent IS NULL
        ) x
        GROUP BY webhook_id, part;

        -- Notifications that may now be complete, for the deliverer's sweep (webhook_completions_sweep): noted here,
        -- in the result's transaction, so none is missed; judged there, once its results are committed.
        -- (The webhooks asked once per notification, not once per row.)
        INSERT INTO webhook_completions (notification_id)
        SELECT x.notification_id
        FROM (SELECT DISTINCT d.notification_id, d.app FROM done_rows d WHERE d.notification_id IS NOT NULL) x
        WHERE EXISTS (SELECT 1 FROM webhooks w WHERE w.app = x.app AND w.disabled_at IS NULL AND 'notification.completed' = ANY (w.events))
        ON CONFLICT DO NOTHING;
    ELSE
        INSERT INTO webhook_outbox (webhook_id, events, event_count)
        SELECT webhook_id, '[' || string_agg(event, ',' ORDER BY ord) || ']', count(*)
        FROM (
            SELECT w.id AS webhook_id, t.device_token AS ord,
                   (row_number() OVER (PARTITION BY w.id ORDER BY t.device_token) - 1) / 1000 AS part,
                   json_build_object(
                       'id', 'evt_' || md5(t.app || ':' || t.device_token || ':' || extract(epoch FROM t.reported_at)::text) || '_unregistered',
                       'type', 'device.unregistered',
                       'timestamp', to_char(t.reported_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                       'data', json_build_object('app', t.app, 'token', t.device_token, 'source', t.source)
                   )::text AS event
            FROM reported t
            JOIN webhooks w ON w.app = t.app AND w.disabled_at IS NULL AND 'device.unregistered' = ANY (w.events)
            -- An upsert's report (processed_at NULL again), not the feedback job's stamp of it.
            WHERE t.processed_at IS NULL
        ) x
        GROUP BY webhook_id, part;
    END IF;
    RETURN NULL;
END $$;
