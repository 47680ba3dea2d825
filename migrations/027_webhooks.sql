-- Delivery events to the caller (issue 45): signed webhooks from a durable outbox. A webhook is a receiver's URL for one
-- app with the event types it wants; its events are written to webhook_outbox by triggers that fire inside the
-- statement recording a result (rows moved to push_history, tokens reported to invalid_tokens), so a crash between
-- the result and the POST loses nothing (notification.completed: the same statement notes the notification in
-- webhook_completions, and the daemon writes the event once every result of it is committed). pushchat-push POSTs each
-- outbox row (up to 1,000 events) until the receiver answers 2xx, then deletes it.
--
-- Expand only: the release before this one still runs on the schema (its inserts into push_history and invalid_tokens
-- fire the triggers, which write events only for webhooks, and it has none to deliver until this release runs again).

CREATE TABLE webhooks (
    id                    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                  text        NOT NULL UNIQUE,
    app                   text        NOT NULL REFERENCES apps (name),
    url                   text        NOT NULL,
    secret                text        NOT NULL,
    previous_secret       text,
    previous_secret_until timestamptz,
    events                text[]      NOT NULL DEFAULT '{notification.failed,device.unregistered,notification.completed}',
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    failures              integer     NOT NULL DEFAULT 0,
    failing_since         timestamptz,
    retry_at              timestamptz,
    last_error            text,
    delivered_at          timestamptz,
    disabled_at           timestamptz,
    disabled_reason       text,
    CONSTRAINT webhooks_name_format CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    CONSTRAINT webhooks_url_size CHECK (octet_length(url) <= 2048),
    CONSTRAINT webhooks_secret_format CHECK (secret LIKE 'whsec\_%' AND coalesce(previous_secret, 'whsec_') LIKE 'whsec\_%'),
    CONSTRAINT webhooks_events CHECK (
        cardinality(events) > 0
        AND events <@ '{notification.sent,notification.failed,device.unregistered,notification.completed,chat}'::text[]
    )
);

COMMENT ON TABLE webhooks IS
    'Receivers of delivery events (pushchat-api webhooks add|list|remove|rotate|disable|enable). Each POST is signed with secret (Standard Webhooks); during a rotation previous_secret signs beside it until previous_secret_until.';
COMMENT ON COLUMN webhooks.id IS 'The webhook''s number: webhook_outbox rows name it.';
COMMENT ON COLUMN webhooks.name IS 'What the operator calls it (letters, digits, dot, dash, underscore): the metrics'' webhook label.';
COMMENT ON COLUMN webhooks.previous_secret IS 'The secret before the last rotation: it signs beside secret until previous_secret_until.';
COMMENT ON COLUMN webhooks.previous_secret_until IS 'When the previous secret stops signing (24 h after webhooks rotate).';
COMMENT ON COLUMN webhooks.created_at IS 'When webhooks add stored it.';
COMMENT ON COLUMN webhooks.updated_at IS 'When the owner last changed it (rotate, disable, enable).';
COMMENT ON COLUMN webhooks.delivered_at IS 'When a POST to it was last taken (2xx).';
COMMENT ON COLUMN webhooks.disabled_reason IS 'Why it is disabled: by hand, or failing for the whole retry window (with the last error).';
COMMENT ON COLUMN webhooks.app IS 'The app whose events it receives.';
COMMENT ON COLUMN webhooks.url IS 'Where events are POSTed: https (http only for a host listed in webhook_private_hosts).';
COMMENT ON COLUMN webhooks.secret IS 'The signing secret, whsec_ + base64 of its bytes. Shown once by add and rotate.';
COMMENT ON COLUMN webhooks.events IS
    'Event types it receives: notification.sent, notification.failed, device.unregistered, notification.completed; chat adds chat messages'' rows (keyed by message id) to the sent and failed events.';
COMMENT ON COLUMN webhooks.failures IS 'POSTs that failed in a row (0 after a 2xx).';
COMMENT ON COLUMN webhooks.failing_since IS 'When the first of those failures happened: past the retry window (3 days) the webhook is disabled.';
COMMENT ON COLUMN webhooks.retry_at IS 'No POST before this time (backoff with jitter after a failure).';
COMMENT ON COLUMN webhooks.last_error IS 'Why the last POST failed (status, timeout, refused connection, address refused).';
COMMENT ON COLUMN webhooks.disabled_at IS 'Set by webhooks disable, or by the daemon after the retry window: no events are written or sent.';

CREATE TABLE webhook_outbox (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id      bigint      NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    events          text        NOT NULL,
    event_count     integer     NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    attempts        integer     NOT NULL DEFAULT 0,
    last_error      text,
    CONSTRAINT webhook_outbox_events CHECK (left(events, 1) = '[' AND event_count BETWEEN 1 AND 1000)
);

COMMENT ON TABLE webhook_outbox IS
    'POSTs waiting for their receiver: one row is one POST ({"events": events}, webhook-id msg_<id>, the same on every retry), deleted once the receiver answered 2xx. SELECT webhook_id, count(*), min(created_at) FROM webhook_outbox GROUP BY 1 shows what waits.';
COMMENT ON COLUMN webhook_outbox.id IS 'The POST''s number: its webhook-id is msg_<id>.';
COMMENT ON COLUMN webhook_outbox.webhook_id IS 'The webhook it goes to (removed with it).';
COMMENT ON COLUMN webhook_outbox.events IS 'The events, a JSON array as text, sent as it is (the body is {"events": …}); each event''s id is stable across retries. events::json in psql.';
COMMENT ON COLUMN webhook_outbox.event_count IS 'How many events (1 to 1,000).';
COMMENT ON COLUMN webhook_outbox.created_at IS 'When the statement that recorded the results wrote it.';
COMMENT ON COLUMN webhook_outbox.last_error IS 'Why its last POST failed.';
COMMENT ON COLUMN webhook_outbox.next_attempt_at IS 'When it is due: a daemon POSTing it moves this ahead by its lease, so a daemon that dies leaves it due again.';
COMMENT ON COLUMN webhook_outbox.attempts IS 'POSTs of it that failed.';

CREATE INDEX webhook_outbox_due_idx ON webhook_outbox (webhook_id, next_attempt_at);
-- A row's events (up to 1,000, about 300 kB) are written once in the result statement and read once per POST: stored
-- out of line without compression (pglz spent its CPU in the result statements, on a 2-core machine the drain's).
ALTER TABLE webhook_outbox ALTER COLUMN events SET STORAGE EXTERNAL;

CREATE TABLE webhook_completions (
    notification_id uuid        PRIMARY KEY,
    noted_at        timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE webhook_completions IS
    'Notifications with results recorded since they were last judged, for a webhook that wants notification.completed: the push daemon writes the event once every recipient is final (webhook_completions_sweep()).';
COMMENT ON COLUMN webhook_completions.notification_id IS 'The notification (notifications.id).';
COMMENT ON COLUMN webhook_completions.noted_at IS 'When a result of it was first noted.';

-- Events of one statement's rows: one outbox row per webhook and 1,000 events. `kind`: 'done' (push_history rows: sent
-- or failed) or 'tokens' (invalid_tokens rows: device.unregistered).
CREATE FUNCTION webhook_outbox_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Without an enabled webhook a result costs one probe of a tiny table.
    IF NOT EXISTS (SELECT 1 FROM webhooks WHERE disabled_at IS NULL) THEN
        RETURN NULL;
    END IF;
    IF TG_ARGV[0] = 'done' THEN
        -- Each event's JSON built as text (strings through to_json, which escapes them): a fifth of the cost of jsonb's
        -- builders on a 2,000-row result, where jsonb took about 23 µs a row in the result statement.
        INSERT INTO webhook_outbox (webhook_id, events, event_count)
        SELECT webhook_id, '[' || string_agg(event, ',' ORDER BY ord) || ']', count(*)
        FROM (
            SELECT w.id AS webhook_id, d.message_id AS ord,
                   (row_number() OVER (PARTITION BY w.id ORDER BY d.message_id) - 1) / 1000 AS part,
                   '{"id":"evt_' || d.message_id || CASE WHEN d.time_sent IS NOT NULL THEN '_sent' ELSE '_failed' END
                   || '","type":"' || CASE WHEN d.time_sent IS NOT NULL THEN 'notification.sent' ELSE 'notification.failed' END
                   || '","timestamp":' || left(to_json(coalesce(d.time_sent, d.time_failed) AT TIME ZONE 'UTC')::text, -1)
                   || 'Z","data":{' || coalesce('"notification_id":"' || d.notification_id || '",', '')
                   || '"message_id":' || d.message_id
                   -- Tokens, apps and platforms are nearly always of characters JSON needs no escape for: quoted as they
                   -- are then (to_json on the three was a third of the event's cost), else through to_json.
                   || CASE WHEN (d.app || d.platform || d.device_token) ~ '^[A-Za-z0-9_:.-]*$'
                           THEN ',"app":"' || d.app || '","platform":"' || d.platform || '","token":"' || d.device_token || '"'
                           ELSE ',"app":' || to_json(d.app) || ',"platform":' || to_json(d.platform) || ',"token":' || to_json(d.device_token)
                      END
                   || ',"status":' || to_json(CASE WHEN d.time_sent IS NOT NULL THEN 'sent' ELSE coalesce(d.last_status, 'failed') END)
                   || CASE WHEN d.time_sent IS NULL THEN ',"reason":' || to_json(coalesce(d.last_error, 'failed')) ELSE '' END
                   || ',"attempts":' || d.attempts || '}}' AS event
            FROM done_rows d
            JOIN webhooks w ON w.app = d.app AND w.disabled_at IS NULL
                AND (CASE WHEN d.time_sent IS NOT NULL THEN 'notification.sent' ELSE 'notification.failed' END) = ANY (w.events)
                AND (d.notification_id IS NOT NULL OR 'chat' = ANY (w.events))
        ) x
        GROUP BY webhook_id, part;

        -- Notifications that may now be complete, for the deliverer's sweep (webhook_completions_sweep): noted here,
        -- in the result's transaction, so none is missed; judged there, once its results are committed.
        INSERT INTO webhook_completions (notification_id)
        SELECT DISTINCT d.notification_id FROM done_rows d
        WHERE d.notification_id IS NOT NULL
            AND EXISTS (SELECT 1 FROM webhooks w WHERE w.app = d.app AND w.disabled_at IS NULL AND 'notification.completed' = ANY (w.events))
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

-- notification.completed for the noted notifications that are complete: expanded (or canceled) with no row waiting.
-- A row whose result is not committed yet still waits here, so a notification is judged complete only once every
-- result is in; the DELETE makes one sweep (of several daemons) write each event. Returns the events written.
CREATE FUNCTION webhook_completions_sweep() RETURNS bigint
LANGUAGE sql AS $$
    DELETE FROM webhook_completions c WHERE NOT EXISTS (SELECT 1 FROM notifications n WHERE n.id = c.notification_id);
    WITH complete AS (
        DELETE FROM webhook_completions c
        USING notifications n
        WHERE c.notification_id = n.id
            AND (n.expanded_at IS NOT NULL OR n.canceled_at IS NOT NULL)
            AND NOT EXISTS (
                SELECT 1 FROM push_queue q
                WHERE q.notification_id = n.id AND q.time_sent IS NULL AND q.time_failed IS NULL
            )
        RETURNING n.id, n.app, n.recipients, n.canceled_at
    ), written AS (
        INSERT INTO webhook_outbox (webhook_id, events, event_count)
        SELECT w.id, '[' || json_build_object(
            'id', 'evt_' || n.id || '_completed',
            'type', 'notification.completed',
            'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
            'data', json_build_object(
                'notification_id', n.id, 'app', n.app,
                'status', CASE WHEN n.canceled_at IS NOT NULL THEN 'canceled' ELSE 'done' END,
                'recipients', n.recipients, 'queued', c.queued, 'sent', c.sent, 'failed', c.failed, 'canceled', c.canceled
            )
        )::text || ']', 1
        FROM complete n
        CROSS JOIN LATERAL (
            SELECT count(*) AS queued,
                   count(*) FILTER (WHERE h.time_sent IS NOT NULL) AS sent,
                   count(*) FILTER (WHERE h.time_failed IS NOT NULL AND h.last_status IS DISTINCT FROM 'canceled') AS failed,
                   count(*) FILTER (WHERE h.last_status = 'canceled') AS canceled
            FROM push_history h WHERE h.notification_id = n.id
        ) c
        JOIN webhooks w ON w.app = n.app AND w.disabled_at IS NULL AND 'notification.completed' = ANY (w.events)
        RETURNING 1
    )
    SELECT count(*) FROM written;
$$;

CREATE TRIGGER push_history_webhook_events AFTER INSERT ON push_history
    REFERENCING NEW TABLE AS done_rows FOR EACH STATEMENT EXECUTE FUNCTION webhook_outbox_write('done');
CREATE TRIGGER invalid_tokens_webhook_events_insert AFTER INSERT ON invalid_tokens
    REFERENCING NEW TABLE AS reported FOR EACH STATEMENT EXECUTE FUNCTION webhook_outbox_write('tokens');
CREATE TRIGGER invalid_tokens_webhook_events_update AFTER UPDATE ON invalid_tokens
    REFERENCING NEW TABLE AS reported FOR EACH STATEMENT EXECUTE FUNCTION webhook_outbox_write('tokens');
