-- Browsers beside the phones (issue 46): Web Push (RFC 8030, 8291, 8292) as a third platform, `web`. A browser's
-- subscription (PushSubscription.toJSON(): an https endpoint on its push service and the keys a message is encrypted
-- for) is stored once in web_subscriptions; devices, chat users and queue rows name it by a token derived from the
-- endpoint, `web_` and the base64url SHA-256 of the endpoint (47 characters), so that every list, DELETE and `tokens`
-- target takes it as it takes an APNs or FCM token, and a browser subscribing again with the same endpoint and new keys
-- replaces its keys.
--
-- Expand only: the release before this one still runs on the schema (it registers no web device and claims only its
-- own platforms' rows: a web row waits for this release's daemon). The platform and token checks are replaced by
-- looser ones, added NOT VALID: every row already there satisfied the stricter check they replace, so a scan of
-- `devices` under an exclusive lock would prove nothing.

ALTER TABLE devices ADD CONSTRAINT devices_platform_web CHECK (platform IN ('apns', 'fcm', 'web')) NOT VALID;
ALTER TABLE devices DROP CONSTRAINT devices_platform;
ALTER TABLE devices RENAME CONSTRAINT devices_platform_web TO devices_platform;
ALTER TABLE devices ADD CONSTRAINT devices_token_format_web CHECK (
    (platform = 'apns' AND device_token ~ '^[0-9a-f]{64}$')
    OR (platform = 'fcm' AND device_token ~ '^[A-Za-z0-9_:.-]+$' AND length(device_token) BETWEEN 100 AND 4096)
    OR (platform = 'web' AND device_token ~ '^web_[A-Za-z0-9_-]{43}$')
) NOT VALID;
ALTER TABLE devices DROP CONSTRAINT devices_token_format;
ALTER TABLE devices RENAME CONSTRAINT devices_token_format_web TO devices_token_format;
COMMENT ON COLUMN devices.platform IS
    'apns (an iPhone: 64 hex digits), fcm (an Android phone: an FCM registration token) or web (a browser: web_ and 43 base64url characters, its subscription in web_subscriptions).';

ALTER TABLE active_users ADD CONSTRAINT active_users_platform_web CHECK (platform IN ('apns', 'fcm', 'web')) NOT VALID;
ALTER TABLE active_users DROP CONSTRAINT active_users_platform;
ALTER TABLE active_users RENAME CONSTRAINT active_users_platform_web TO active_users_platform;
ALTER TABLE active_users ADD CONSTRAINT active_users_token_format_web CHECK (
    device_token = '0'
    OR (platform = 'apns' AND device_token ~ '^[0-9a-f]{64}$')
    OR (platform = 'fcm' AND device_token ~ '^[A-Za-z0-9_:.-]+$' AND length(device_token) BETWEEN 100 AND 4096)
    OR (platform = 'web' AND device_token ~ '^web_[A-Za-z0-9_-]{43}$')
) NOT VALID;
ALTER TABLE active_users DROP CONSTRAINT active_users_token_format;
ALTER TABLE active_users RENAME CONSTRAINT active_users_token_format_web TO active_users_token_format;
COMMENT ON COLUMN active_users.platform IS
    'apns (the PushChat iPhone app), fcm (an Android app that joined with platform=fcm) or web (a browser that joined with platform=web and its subscription as the token).';

COMMENT ON COLUMN push_queue.platform IS
    'apns (payload: the APNs JSON), fcm (payload: the FCM message without its token: notification, data, android) or web (payload: the Declarative Web Push JSON, encrypted for the subscription when sent).';

CREATE TABLE web_subscriptions (
    device_token text        PRIMARY KEY,
    endpoint     text        NOT NULL,
    p256dh       text        NOT NULL,
    auth         text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT web_subscriptions_token_format CHECK (device_token ~ '^web_[A-Za-z0-9_-]{43}$'),
    CONSTRAINT web_subscriptions_endpoint CHECK (endpoint LIKE 'https://%' AND octet_length(endpoint) <= 1024),
    CONSTRAINT web_subscriptions_p256dh CHECK (p256dh ~ '^[A-Za-z0-9_-]{87}$'),
    CONSTRAINT web_subscriptions_auth CHECK (auth ~ '^[A-Za-z0-9_-]{22}$')
);
COMMENT ON TABLE web_subscriptions IS
    'Browsers'' push subscriptions (POST /v1/devices with platform web, cmd=join&platform=web): what a web token stands for. Pruned with the last device or chat user that names it.';
COMMENT ON COLUMN web_subscriptions.device_token IS 'web_ and the base64url SHA-256 of the endpoint: the token devices, active_users and push_queue hold.';
COMMENT ON COLUMN web_subscriptions.endpoint IS 'The push service''s URL for this browser (https; checked against the network''s private addresses at registration and every send).';
COMMENT ON COLUMN web_subscriptions.p256dh IS 'The browser''s ECDH public key (base64url of the uncompressed P-256 point): messages are encrypted for it (RFC 8291).';
COMMENT ON COLUMN web_subscriptions.auth IS 'The browser''s 16-byte authentication secret, base64url: part of every message''s key.';
COMMENT ON COLUMN web_subscriptions.updated_at IS 'When the browser last registered it (keys replaced).';

ALTER TABLE notifications ADD COLUMN web_payload text;
ALTER TABLE notifications ADD CONSTRAINT notifications_web_payload_size CHECK (octet_length(web_payload) <= 5120) NOT VALID;
COMMENT ON COLUMN notifications.web_payload IS
    'A broadcast''s Declarative Web Push JSON for browsers (NULL: it has none; the count found no browser).';

ALTER TABLE apps ADD COLUMN webpush_vapid_key_file text, ADD COLUMN webpush_subject text, ADD COLUMN webpush_public_key text;
ALTER TABLE apps ADD CONSTRAINT apps_webpush_path_absolute CHECK (coalesce(webpush_vapid_key_file, '/') LIKE '/%');
ALTER TABLE apps ADD CONSTRAINT apps_webpush_subject CHECK (coalesce(webpush_subject, 'mailto:') ~ '^(mailto:|https:)');
COMMENT ON COLUMN apps.webpush_vapid_key_file IS
    'Absolute path of the P-256 private key (PEM) the push daemon signs the app''s Web Push requests with (VAPID; never the key itself). NULL for the default app: webpush_vapid_key_file.';
COMMENT ON COLUMN apps.webpush_subject IS 'The app''s VAPID subject (mailto: or https:). NULL: webpush_subject.';
ALTER TABLE apps ADD CONSTRAINT apps_webpush_public_key CHECK (
    (webpush_vapid_key_file IS NULL) = (webpush_public_key IS NULL) AND coalesce(webpush_public_key, 'B' || repeat('A', 86)) ~ '^B[A-Za-z0-9_-]{86}$'
);
COMMENT ON COLUMN apps.webpush_public_key IS
    'The public half of webpush_vapid_key_file''s key (base64url of the uncompressed point): what the API serves the app''s pages (GET /v1/webpush/public-key) without reading the private key.';
