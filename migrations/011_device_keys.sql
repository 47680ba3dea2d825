-- pushchat:no-transaction
-- The same device token in two apps is two devices (issue 29), step one of two (expand): unique indexes on
-- (app, device_token) beside the old keys on device_token, which the release before apps still names (ON CONFLICT
-- (device_token)). This release's statements use the new indexes, so it runs before and after step two,
-- 012_device_keys_contract.sql, which `migrate --contract` applies once no older release will run again.
-- Built CONCURRENTLY (a running service keeps registering); an index a failed build left invalid is built again.
DROP INDEX CONCURRENTLY IF EXISTS devices_app_token_key;
CREATE UNIQUE INDEX CONCURRENTLY devices_app_token_key ON devices (app, device_token);
DROP INDEX CONCURRENTLY IF EXISTS invalid_tokens_app_token_key;
CREATE UNIQUE INDEX CONCURRENTLY invalid_tokens_app_token_key ON invalid_tokens (app, device_token);
