-- Android beside the iPhones (issue 30): devices, chat users and queue rows have a platform, `apns` (every row from
-- before) or `fcm` (Firebase Cloud Messaging), and an app may have a Firebase service account. Expand only: the release
-- before this one still runs on the schema (it sees only what it knew; guide §16 says what a rollback leaves unsent).
--
-- An FCM registration token is opaque and case-sensitive (100 to 4,096, in practice about 150 to 200, letters, digits and
-- '-', '_', ':'); an APNs token stays 64 lower-case hex digits.

ALTER TABLE devices ADD COLUMN platform text NOT NULL DEFAULT 'apns';
ALTER TABLE devices ADD CONSTRAINT devices_platform CHECK (platform IN ('apns', 'fcm'));
ALTER TABLE devices DROP CONSTRAINT devices_token_format;
ALTER TABLE devices ADD CONSTRAINT devices_token_format CHECK (
    (platform = 'apns' AND device_token ~ '^[0-9a-f]{64}$')
    OR (platform = 'fcm' AND device_token ~ '^[A-Za-z0-9_:.-]+$' AND length(device_token) BETWEEN 100 AND 4096)
);
COMMENT ON COLUMN devices.platform IS 'apns (an iPhone: 64 hex digits) or fcm (an Android phone: an FCM registration token).';

ALTER TABLE active_users ADD COLUMN platform text NOT NULL DEFAULT 'apns';
ALTER TABLE active_users ADD CONSTRAINT active_users_platform CHECK (platform IN ('apns', 'fcm'));
ALTER TABLE active_users DROP CONSTRAINT active_users_token_format;
ALTER TABLE active_users ADD CONSTRAINT active_users_token_format CHECK (
    device_token = '0'
    OR (platform = 'apns' AND device_token ~ '^[0-9a-f]{64}$')
    OR (platform = 'fcm' AND device_token ~ '^[A-Za-z0-9_:.-]+$' AND length(device_token) BETWEEN 100 AND 4096)
);
COMMENT ON COLUMN active_users.platform IS 'apns (the PushChat iPhone app) or fcm (an Android app that joined with platform=fcm).';

-- No constraint on the queue (a broadcast inserts a million rows; the API checks the platform of each recipient).
ALTER TABLE push_queue ADD COLUMN platform text NOT NULL DEFAULT 'apns';
COMMENT ON COLUMN push_queue.platform IS
    'apns (payload: the APNs JSON) or fcm (payload: the FCM message without its token: notification, data, android).';

ALTER TABLE apps ADD COLUMN fcm_service_account_file text;
ALTER TABLE apps ADD CONSTRAINT apps_fcm_path_absolute CHECK (coalesce(fcm_service_account_file, '/') LIKE '/%');
COMMENT ON COLUMN apps.fcm_service_account_file IS
    'Absolute path of the Firebase service-account JSON file the push daemon reads for the app''s Android devices (never the key itself). NULL for the default app: fcm_service_account_file.';

COMMENT ON COLUMN invalid_tokens.device_token IS 'The token: lower-case hex (APNs) or an FCM registration token as FCM gave it.';
