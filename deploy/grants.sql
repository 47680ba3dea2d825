-- PushChat Server: what the services' role may do, run by the guide after `migrate` (as postgres, in the pushchat
-- database). The schema belongs to pushchat_owner, which only `migrate` uses; the services connect as pushchat and
-- may read and write rows, never change the schema (no CREATE, ALTER, DROP, TRUNCATE). Running it again is harmless.
GRANT CONNECT ON DATABASE pushchat TO pushchat;
GRANT USAGE ON SCHEMA public TO pushchat;
GRANT SELECT, INSERT, UPDATE, DELETE ON active_users, messages, push_queue, invalid_tokens TO pushchat;
-- Sent and failed notifications (moved there by the daemons), and the view of both for the status and psql.
GRANT SELECT, INSERT, UPDATE, DELETE ON push_history TO pushchat;
GRANT SELECT ON push_deliveries TO pushchat;
GRANT SELECT, INSERT, UPDATE, DELETE ON devices, notifications, idempotency_keys TO pushchat;
-- Keys are read by the API and written only by `keys create|revoke --role pushchat_owner`: a compromised service
-- cannot mint itself a key. (REVOKE: earlier versions of this file, and the default privileges below, granted more.)
GRANT SELECT ON api_keys TO pushchat;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON api_keys FROM pushchat;
-- Apps (issue 29) likewise: the services read them, only `pushchat-api apps` as the owner changes them (a compromised
-- service cannot point an app at a key file of its choosing).
GRANT SELECT ON apps TO pushchat;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON apps FROM pushchat;
-- Webhooks (issue 45): the push daemon reads them (it signs with their secrets) and records how their POSTs went, and
-- may disable one past the retry window; only `pushchat-api webhooks` as the owner adds, changes or removes one (a
-- compromised service cannot point events at a URL of its choosing). Their outbox is written by the statements that
-- record results (triggers) and emptied by the daemon.
GRANT SELECT ON webhooks TO pushchat;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON webhooks FROM pushchat;
GRANT UPDATE (failures, failing_since, retry_at, last_error, delivered_at, disabled_at, disabled_reason) ON webhooks TO pushchat;
GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_outbox, webhook_completions TO pushchat;
-- Browsers' push subscriptions (issue 46): the API stores one with the device or chat user that names it; the feedback
-- job prunes those no device or user names any more.
GRANT SELECT, INSERT, UPDATE, DELETE ON web_subscriptions TO pushchat;
GRANT SELECT ON schema_migrations TO pushchat;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO pushchat;
-- Tables later migrations create can be read at once; writing them takes a line above, in the release that needs it
-- (the upgrade runs this file after migrate): a later table holding secrets is never writable by default.
-- (REVOKE: earlier versions of this file gave every future table INSERT, UPDATE and DELETE by default.)
ALTER DEFAULT PRIVILEGES FOR ROLE pushchat_owner IN SCHEMA public REVOKE INSERT, UPDATE, DELETE ON TABLES FROM pushchat;
ALTER DEFAULT PRIVILEGES FOR ROLE pushchat_owner IN SCHEMA public GRANT SELECT ON TABLES TO pushchat;
ALTER DEFAULT PRIVILEGES FOR ROLE pushchat_owner IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO pushchat;
