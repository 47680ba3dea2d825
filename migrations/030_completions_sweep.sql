-- The deliverer's sweep of completed notifications (issue 45), made cheap during a broadcast. Profiled during a
-- broadcast to a million devices with a webhook for notification.sent and notification.completed, the sweep (run once
-- a second while a webhook exists) was PostgreSQL's largest share of the events' cost, more than the result statements'
-- events: its NOT EXISTS over push_queue could be planned as a hash anti-join whose hash side is a scan of the whole
-- queue. Now the check for a waiting row is a subquery run per noted notification that stops at the first row found.
-- The same events as 027's sweep wrote; a function replaced in place, so the release before this one runs on it.

CREATE OR REPLACE FUNCTION webhook_completions_sweep() RETURNS bigint
LANGUAGE sql AS $$
    DELETE FROM webhook_completions c WHERE NOT EXISTS (SELECT 1 FROM notifications n WHERE n.id = c.notification_id);
    WITH complete AS (
        DELETE FROM webhook_completions c
        USING notifications n
        WHERE c.notification_id = n.id
            AND (n.expanded_at IS NOT NULL OR n.canceled_at IS NOT NULL)
            -- A row still waiting, asked per noted notification as a subquery that stops at the first one found:
            -- the NOT EXISTS 027 had let the planner hash all of push_queue (a million rows during a broadcast)
            -- for each sweep, once a second.
            AND (SELECT 1 FROM push_queue q
                 WHERE q.notification_id = n.id AND q.time_sent IS NULL AND q.time_failed IS NULL
                 LIMIT 1) IS NULL
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
