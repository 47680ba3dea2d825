-- pushchat:no-transaction
-- Indexes for retention (pushchat-api queue prune, hourly): old messages, users that never got a token, handled
-- invalid-token reports. Built CONCURRENTLY, outside a transaction, so the API and the push daemon keep running
-- while they build; IF NOT EXISTS makes the migration safe to run again after an interruption.
CREATE INDEX CONCURRENTLY IF NOT EXISTS messages_created_at_idx ON messages (created_at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS active_users_tokenless_idx ON active_users (token_updated_at) WHERE device_token = '0';
CREATE INDEX CONCURRENTLY IF NOT EXISTS invalid_tokens_processed_idx ON invalid_tokens (processed_at) WHERE processed_at IS NOT NULL;
