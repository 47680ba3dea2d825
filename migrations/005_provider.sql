-- PushChat Server: the general provider API (/v1): API keys, a device registry, and notifications that other
-- backend code sends to tokens, users, chat users, rooms or everyone. Every notification still becomes one
-- push_queue row per recipient, drained by the same daemon.

CREATE TABLE api_keys (
    name                  text        PRIMARY KEY,
    key_hash              text        NOT NULL UNIQUE,
    requests_per_minute   integer     NOT NULL DEFAULT 0,
    recipients_per_minute integer     NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL DEFAULT now(),
    revoked_at            timestamptz,
    CONSTRAINT api_keys_name_format CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    CONSTRAINT api_keys_limits CHECK (requests_per_minute >= 0 AND recipients_per_minute >= 0)
);

COMMENT ON TABLE api_keys IS
    'Keys of the provider API (pushchat-api keys create|list|revoke). A request carries Authorization: Bearer KEY; only the key''s SHA-256 is stored.';
COMMENT ON COLUMN api_keys.name IS 'Who the key is for, e.g. alerting; letters, digits, dot, dash, underscore.';
COMMENT ON COLUMN api_keys.key_hash IS 'SHA-256 of the key, lower-case hex. The key itself is shown once, at creation.';
COMMENT ON COLUMN api_keys.requests_per_minute IS 'Requests this key may make per minute (0: no limit).';
COMMENT ON COLUMN api_keys.recipients_per_minute IS 'Notifications (recipients, not requests) this key may queue per minute (0: no limit).';
COMMENT ON COLUMN api_keys.revoked_at IS 'When the key was revoked; a revoked key is refused (401).';

CREATE TABLE devices (
    device_token   text        PRIMARY KEY,
    user_ref       text,
    client_info    text,
    registered_by  text        NOT NULL,
    registered_at  timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    last_badge     integer,
    CONSTRAINT devices_token_format CHECK (device_token ~ '^[0-9a-f]{64}$'),
    CONSTRAINT devices_user_size CHECK (octet_length(user_ref) <= 255),
    CONSTRAINT devices_client_info_size CHECK (octet_length(client_info) <= 1024)
);

COMMENT ON TABLE devices IS
    'Devices registered through the provider API (POST /v1/devices), optionally tied to a user. The feedback job deletes a device whose token APNs reported gone, unless it registered again after the report.';
COMMENT ON COLUMN devices.device_token IS 'APNs device token, 64 lower-case hex digits.';
COMMENT ON COLUMN devices.user_ref IS 'The application''s own user reference (at most 255 bytes); NULL for none.';
COMMENT ON COLUMN devices.client_info IS 'Free text the app sent with the registration (app version, device model, …).';
COMMENT ON COLUMN devices.registered_by IS 'The API key (name) that registered it last.';
COMMENT ON COLUMN devices.registered_at IS 'When the token was first registered.';
COMMENT ON COLUMN devices.updated_at IS 'When the token was last registered: the feedback job keeps devices that registered again after APNs reported them gone.';
COMMENT ON COLUMN devices.last_badge IS 'The badge last queued for the device (only_if_badge_changed skips a notification with the same badge).';

CREATE INDEX devices_user_idx ON devices (user_ref) WHERE user_ref IS NOT NULL;

CREATE TABLE notifications (
    id          uuid        PRIMARY KEY,
    key_name    text        NOT NULL,
    recipients  integer     NOT NULL,
    push_type   text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE notifications IS
    'Notifications sent through POST /v1/notifications: one row each; its recipients are the push_queue rows with this notification_id.';
COMMENT ON COLUMN notifications.key_name IS 'The API key (name) that sent it.';
COMMENT ON COLUMN notifications.recipients IS 'How many push_queue rows it queued (device tokens, each once).';

CREATE INDEX notifications_created_at_idx ON notifications (created_at);

CREATE TABLE idempotency_keys (
    key_name         text        NOT NULL,
    idempotency_key  text        NOT NULL,
    notification_id  uuid        NOT NULL,
    request_hash     text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key_name, idempotency_key)
);

COMMENT ON TABLE idempotency_keys IS
    'Idempotency-Key headers of POST /v1/notifications: the same key (per API key) within 24 hours answers the first notification and queues nothing.';
COMMENT ON COLUMN idempotency_keys.request_hash IS 'SHA-256 of the request body: the same key with another body is refused (409).';

-- The provider's own fields on each queued notification (NULL for chat messages).
ALTER TABLE push_queue
    ADD COLUMN notification_id uuid,
    ADD COLUMN topic           text;

COMMENT ON COLUMN push_queue.notification_id IS 'The provider API notification (notifications.id) this row belongs to; NULL for chat messages.';
COMMENT ON COLUMN push_queue.topic IS 'HTTP/2 apns-topic for this row; NULL means the daemon''s apns_topic.';
