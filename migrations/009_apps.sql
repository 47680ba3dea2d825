-- Several apps on one server (issue 29). An app is a bundle id in one APNs environment with its own credentials
-- (a token signing key or a client certificate) and transport. Devices, provider keys, notifications, queue rows and
-- invalid-token reports belong to an app.
--
-- Expand only (the guide's section 16): the release before this one still runs on this schema, so `devices` and
-- `invalid_tokens` keep their keys (device_token), which its statements name (ON CONFLICT (device_token)). A token
-- therefore belongs to one app for now; a later release moves the keys to (app, device_token).
--
-- The deployment as it was becomes the app named `default`, whose empty settings mean "from the daemon's
-- configuration" (the env file: PUSHCHAT_APNS_*): an existing installation keeps working with no new step, and every
-- row already here (queued or not) belongs to it. The database holds the paths of credential files, never a key.

CREATE TABLE apps (
    name             text        PRIMARY KEY,
    bundle_id        text,
    environment      text,
    transport        text,
    key_file         text,
    key_id           text,
    team_id          text,
    certificate      text,
    passphrase_file  text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    disabled_at      timestamptz,
    CONSTRAINT apps_name_format CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    CONSTRAINT apps_bundle_id_format CHECK (bundle_id ~ '^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$' AND octet_length(bundle_id) <= 155),
    CONSTRAINT apps_environment CHECK (environment IN ('sandbox', 'production')),
    CONSTRAINT apps_transport CHECK (transport IN ('binary', 'http2')),
    CONSTRAINT apps_key_id_format CHECK (key_id ~ '^[A-Z0-9]{10}$'),
    CONSTRAINT apps_team_id_format CHECK (team_id ~ '^[A-Z0-9]{10}$'),
    CONSTRAINT apps_paths_absolute CHECK (
        coalesce(key_file, '/') LIKE '/%' AND coalesce(certificate, '/') LIKE '/%' AND coalesce(passphrase_file, '/') LIKE '/%'
    ),
    -- Either every setting comes from the configuration (the default app as migrated), or the app says all of them:
    -- a bundle id, an environment, a transport, and exactly one kind of credentials (a key with its ids, or a
    -- certificate); the binary interface takes only a certificate.
    CONSTRAINT apps_settings CHECK (
        (bundle_id IS NULL AND environment IS NULL AND transport IS NULL AND key_file IS NULL AND key_id IS NULL
            AND team_id IS NULL AND certificate IS NULL AND passphrase_file IS NULL)
        OR (bundle_id IS NOT NULL AND environment IS NOT NULL AND transport IS NOT NULL AND (
            (key_file IS NOT NULL AND key_id IS NOT NULL AND team_id IS NOT NULL AND certificate IS NULL
                AND passphrase_file IS NULL AND transport = 'http2')
            OR (certificate IS NOT NULL AND key_file IS NULL AND key_id IS NULL AND team_id IS NULL)))
    )
);

COMMENT ON TABLE apps IS
    'The apps this server sends for (pushchat-api apps add|list|update|disable). The app named default, created by migrate, takes every empty setting from the daemon''s configuration (PUSHCHAT_APNS_*).';
COMMENT ON COLUMN apps.name IS 'The app''s name in keys, rows and metrics: 1 to 64 lower-case letters, digits, ''.'', ''-'', ''_''.';
COMMENT ON COLUMN apps.bundle_id IS 'The bundle id; the topic of its notifications (with Apple''s suffixes for VoIP, complications, ...). NULL: apns_topic.';
COMMENT ON COLUMN apps.environment IS 'sandbox (Apple''s development host) or production. NULL: from the configuration.';
COMMENT ON COLUMN apps.transport IS 'binary (certificate only) or http2. NULL: from the configuration.';
COMMENT ON COLUMN apps.key_file IS 'Absolute path of the .p8 token signing key the push daemon reads (never the key itself).';
COMMENT ON COLUMN apps.key_id IS 'The signing key''s 10-character id.';
COMMENT ON COLUMN apps.team_id IS 'The Apple developer team''s 10-character id.';
COMMENT ON COLUMN apps.certificate IS 'Absolute path of the client certificate and key (PEM) the push daemon reads.';
COMMENT ON COLUMN apps.passphrase_file IS 'Absolute path of a file holding the certificate key''s passphrase; NULL when it has none.';
COMMENT ON COLUMN apps.created_at IS 'When the app was added.';
COMMENT ON COLUMN apps.updated_at IS 'When its settings last changed (pushchat-api apps update); the push daemon reloads apps that changed.';
COMMENT ON COLUMN apps.disabled_at IS 'When the app was disabled: its keys get 403, its queued rows stay queued, nothing is sent for it.';

INSERT INTO apps (name) VALUES ('default');

-- Queue rows: no foreign key (a broadcast inserts a million rows; the API checks the app once per request).
ALTER TABLE push_queue ADD COLUMN app text NOT NULL DEFAULT 'default';
COMMENT ON COLUMN push_queue.app IS 'The app (apps.name) whose credentials and topic the notification goes out with.';

ALTER TABLE api_keys ADD COLUMN app text NOT NULL DEFAULT 'default' REFERENCES apps (name);
COMMENT ON COLUMN api_keys.app IS 'The app the key works in: it sees and sends only within it.';

ALTER TABLE notifications ADD COLUMN app text NOT NULL DEFAULT 'default' REFERENCES apps (name);
COMMENT ON COLUMN notifications.app IS 'The app of the key that sent it.';

ALTER TABLE devices ADD COLUMN app text NOT NULL DEFAULT 'default' REFERENCES apps (name);
COMMENT ON COLUMN devices.app IS 'The app the device registered with (another app''s key cannot register or see it).';

ALTER TABLE invalid_tokens ADD COLUMN app text NOT NULL DEFAULT 'default';
COMMENT ON COLUMN invalid_tokens.app IS 'The app APNs said the token is invalid for; only that app''s devices and chat users are pruned.';

-- Columns from before that did not explain themselves.
COMMENT ON COLUMN api_keys.created_at IS 'When the key was created (pushchat-api keys create).';
COMMENT ON COLUMN notifications.id IS 'The notification''s id, as POST /v1/notifications answered it (its rows carry it in push_queue.notification_id).';
COMMENT ON COLUMN notifications.push_type IS 'The apns-push-type of every row it queued (alert, background, ...).';
COMMENT ON COLUMN notifications.created_at IS 'When it was queued.';
