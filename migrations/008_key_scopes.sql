-- What each provider API key may do. Keys made before have every scope (they could do everything), so they keep
-- working; `pushchat-api keys create` gives new keys send, devices:write and status unless told otherwise.
ALTER TABLE api_keys ADD COLUMN scopes text[] NOT NULL DEFAULT '{send,broadcast,devices:read,devices:write,status}';
ALTER TABLE api_keys ALTER COLUMN scopes SET DEFAULT '{send,devices:write,status}';
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes CHECK (scopes <@ '{send,broadcast,devices:read,devices:write,status}'::text[]);

COMMENT ON COLUMN api_keys.scopes IS
    'What the key may do: send (to tokens and users), broadcast (to a room, all, or udids), devices:read (list devices), devices:write (register, delete), status (of its own notifications).';
