-- PushChat Server: the initial schema.
-- The tutorial's two tables (active_users, push_queue) with what delivery needs, plus stored chat messages.
-- Applied by `pushchat-api migrate`, inside one transaction, and recorded in schema_migrations.

-- Users -----------------------------------------------------------------------------------------------------------

CREATE TABLE active_users (
    udid              text        PRIMARY KEY,
    device_token      text        NOT NULL,
    nickname          text        NOT NULL,
    secret_code       text        NOT NULL,
    ip_address        inet,
    joined_at         timestamptz NOT NULL DEFAULT now(),
    token_updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT active_users_udid_format CHECK (udid ~ '^[0-9a-f]{32}([0-9a-f]{8})?$'),
    CONSTRAINT active_users_token_format CHECK (device_token = '0' OR device_token ~ '^[0-9a-f]{64}$')
);

COMMENT ON TABLE active_users IS
    'Devices that joined a chat room (cmd=join); one row per device, deleted on leave or when APNs reports the token expired.';
COMMENT ON COLUMN active_users.udid IS
    'Device identifier sent by the app: 40 hex digits (UDID) or 32 (identifierForVendor UUID without dashes), lower case.';
COMMENT ON COLUMN active_users.device_token IS
    'APNs device token, 64 lower-case hex digits, or ''0'' while the device has no token yet (it then gets no pushes).';
COMMENT ON COLUMN active_users.nickname IS 'Name the user chose; shown before each message in the notification.';
COMMENT ON COLUMN active_users.secret_code IS 'The chat room: everyone who joined with the same code receives each other''s messages.';
COMMENT ON COLUMN active_users.ip_address IS 'Client address the join request came from (IPv4 or IPv6).';
COMMENT ON COLUMN active_users.joined_at IS 'When the device (last) joined.';
COMMENT ON COLUMN active_users.token_updated_at IS
    'When the device token was last registered (join or update); the feedback job keeps users who re-registered after APNs reported their token gone.';

CREATE INDEX active_users_secret_code_idx ON active_users (secret_code);
CREATE INDEX active_users_device_token_idx ON active_users (device_token);

-- Notifications ---------------------------------------------------------------------------------------------------

CREATE TABLE push_queue (
    message_id   bigserial   PRIMARY KEY,
    device_token text        NOT NULL,
    payload      text        NOT NULL,
    time_queued  timestamptz NOT NULL DEFAULT now(),
    time_sent    timestamptz,
    attempts     integer     NOT NULL DEFAULT 0,
    last_status  text,
    last_error   text,
    time_failed  timestamptz,
    priority     smallint,
    expiration   timestamptz,
    collapse_id  text,
    push_type    text,
    CONSTRAINT push_queue_sent_or_failed CHECK (time_sent IS NULL OR time_failed IS NULL)
);

COMMENT ON TABLE push_queue IS
    'Outgoing push notifications, one row per recipient device. Pending: time_sent IS NULL AND time_failed IS NULL. The push daemon sends pending rows and stamps time_sent; rows that can never be delivered get time_failed and a reason.';
COMMENT ON COLUMN push_queue.message_id IS 'Queue order; also the notification identifier on the wire (binary command 2) and the seed of apns-id (HTTP/2).';
COMMENT ON COLUMN push_queue.device_token IS 'Recipient APNs device token (hex). Not validated here: the push daemon fails rows whose token can never be sent.';
COMMENT ON COLUMN push_queue.payload IS 'The JSON payload exactly as sent to APNs, e.g. {"aps":{"alert":"Bob: hi","sound":"default"}}.';
COMMENT ON COLUMN push_queue.time_queued IS 'When the row was queued.';
COMMENT ON COLUMN push_queue.time_sent IS 'When APNs accepted the notification; NULL while pending or failed.';
COMMENT ON COLUMN push_queue.attempts IS 'How many times the notification was written to APNs.';
COMMENT ON COLUMN push_queue.last_status IS 'The last APNs result: binary error status (e.g. 8) or HTTP/2 status and reason (e.g. 410 Unregistered).';
COMMENT ON COLUMN push_queue.last_error IS 'Human-readable reason of the last failure.';
COMMENT ON COLUMN push_queue.time_failed IS 'When the row was given up as undeliverable; NULL unless failed.';
COMMENT ON COLUMN push_queue.priority IS 'APNs priority (10 now, 5 power-considerate, 1); NULL means the daemon''s default.';
COMMENT ON COLUMN push_queue.expiration IS 'Until when APNs should keep trying to deliver; NULL means the daemon''s default.';
COMMENT ON COLUMN push_queue.collapse_id IS 'HTTP/2 apns-collapse-id; NULL for none.';
COMMENT ON COLUMN push_queue.push_type IS 'HTTP/2 apns-push-type; NULL means alert.';

-- Polling for work stays fast however many sent and failed rows the table holds.
CREATE INDEX push_queue_pending_idx ON push_queue (message_id) WHERE time_sent IS NULL AND time_failed IS NULL;

-- One NOTIFY per inserting statement (not per row: NOTIFY serialises commits), so the push daemon wakes at once
-- whoever queues rows: the API, an admin command or psql.
CREATE FUNCTION push_queue_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('push_queue', '');
    RETURN NULL;
END;
$$;

COMMENT ON FUNCTION push_queue_notify() IS 'Wakes listeners on channel push_queue after rows are queued.';

CREATE TRIGGER push_queue_notify_insert
    AFTER INSERT ON push_queue
    FOR EACH STATEMENT EXECUTE FUNCTION push_queue_notify();

-- Messages --------------------------------------------------------------------------------------------------------

CREATE TABLE messages (
    id           bigserial   PRIMARY KEY,
    secret_code  text        NOT NULL,
    sender_udid  text        NOT NULL,
    sender_name  text        NOT NULL,
    text         text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE messages IS
    'Every chat message (cmd=message), kept on the server so the app can fetch what it missed (cmd=fetch).';
COMMENT ON COLUMN messages.id IS 'Message order; cmd=fetch returns messages with an id greater than its since parameter.';
COMMENT ON COLUMN messages.secret_code IS 'The room the message was sent to.';
COMMENT ON COLUMN messages.sender_udid IS 'Device that sent it (it may have left since).';
COMMENT ON COLUMN messages.sender_name IS 'Sender''s nickname when the message was sent.';
COMMENT ON COLUMN messages.text IS 'The full message text as sent (the notification may carry a shortened copy).';
COMMENT ON COLUMN messages.created_at IS 'When the server stored it.';

CREATE INDEX messages_room_idx ON messages (secret_code, id);
