-- Broadcasts in the background (issue 31): a notification to all of an app's devices, a room or a long list of users is
-- accepted at once, counted rather than inserted, and the push daemons expand it into push_queue in bounded batches.
-- Each batch is one statement that moves the notification's cursor and inserts its rows together, so a crash or a
-- restart resumes where the last batch ended: nothing lost, nothing queued twice. The rows a broadcast queues are
-- `bulk`: the daemons claim every other row first, so chat keeps its latency while a million rows drain.
--
-- Expand only: the release before this one still runs on the schema (it queues every notification at once, and neither
-- expands nor cancels one this release accepted: guide §16).

ALTER TABLE notifications
    ADD COLUMN target_kind           text,
    ADD COLUMN target_list           text[],
    ADD COLUMN target_room           text,
    ADD COLUMN include_chat          boolean     NOT NULL DEFAULT false,
    ADD COLUMN payload               text,
    ADD COLUMN fcm_payload           text,
    ADD COLUMN priority              smallint,
    ADD COLUMN expiration            timestamptz,
    ADD COLUMN collapse_id           text,
    ADD COLUMN topic                 text,
    ADD COLUMN badge                 integer,
    ADD COLUMN only_if_badge_changed boolean     NOT NULL DEFAULT false,
    ADD COLUMN expand_phase          text,
    ADD COLUMN expand_cursor         text        NOT NULL DEFAULT '',
    ADD COLUMN expanded              integer,
    ADD COLUMN expanded_at           timestamptz DEFAULT now(),
    ADD COLUMN canceled_at           timestamptz,
    ADD CONSTRAINT notifications_target_kind CHECK (target_kind IN ('all', 'room', 'users')),
    ADD CONSTRAINT notifications_expand_phase CHECK (expand_phase IN ('devices', 'chat'));

COMMENT ON COLUMN notifications.recipients IS
    'How many recipients it had when accepted (device tokens, each once): the push_queue rows it queued at once, or the devices a broadcast counted.';
COMMENT ON COLUMN notifications.target_kind IS
    'A broadcast expanded in the background: all, room or users (with target_room, target_list); NULL: its rows were queued with it.';
COMMENT ON COLUMN notifications.target_list IS 'The user references of a broadcast to users.';
COMMENT ON COLUMN notifications.target_room IS 'The room (secret code) of a broadcast to a room.';
COMMENT ON COLUMN notifications.include_chat IS 'A broadcast to all that also reaches the chat API''s users (the chat app''s keys).';
COMMENT ON COLUMN notifications.payload IS 'A broadcast''s APNs payload, copied to each row it queues.';
COMMENT ON COLUMN notifications.fcm_payload IS 'A broadcast''s FCM message for Android devices (NULL: it has none; the count found no Android device).';
COMMENT ON COLUMN notifications.priority IS 'A broadcast''s priority, copied to each row it queues (NULL: the daemon''s default).';
COMMENT ON COLUMN notifications.expiration IS 'A broadcast''s expiration, copied to each row it queues.';
COMMENT ON COLUMN notifications.collapse_id IS 'A broadcast''s collapse id, copied to each row it queues.';
COMMENT ON COLUMN notifications.topic IS 'A broadcast''s topic, copied to each row it queues (NULL: the app''s).';
COMMENT ON COLUMN notifications.only_if_badge_changed IS 'A broadcast skips devices already noted with its badge.';
COMMENT ON COLUMN notifications.badge IS 'The badge a broadcast notes on the devices it reaches (only_if_badge_changed skips devices noted with it).';
COMMENT ON COLUMN notifications.expand_phase IS
    'Where a broadcast''s expansion stands: devices (the app''s registered devices), then chat (the chat API''s users); NULL when done or canceled.';
COMMENT ON COLUMN notifications.expand_cursor IS 'The last device token of the phase a batch queued: the next batch starts after it.';
COMMENT ON COLUMN notifications.expanded IS 'push_queue rows queued so far (NULL: all its recipients, queued with it).';
COMMENT ON COLUMN notifications.expanded_at IS 'When all its rows were queued: at once, or when a broadcast''s last batch ran; NULL while expanding.';
COMMENT ON COLUMN notifications.canceled_at IS
    'When DELETE /v1/notifications/ID canceled it: expansion stops and its rows no connection holds are failed as canceled.';

-- The daemons find the broadcasts to expand, oldest first.
CREATE INDEX notifications_expanding_idx ON notifications (created_at) WHERE expanded_at IS NULL AND canceled_at IS NULL;

ALTER TABLE push_queue ADD COLUMN bulk boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN push_queue.bulk IS 'Queued by a broadcast''s expansion: the daemons claim other rows (chat, single notifications) first.';
