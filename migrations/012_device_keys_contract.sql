-- pushchat:contract
-- Step two of two (contract; 011_device_keys.sql is step one): devices and invalid-token reports are keyed by
-- (app, device_token), so the same token registered in two apps is two devices, each pruned only on its app's
-- reports. Applied by `pushchat-api migrate --contract` only (a fresh database gets it at once): releases from before
-- apps name the old keys and no longer run on the schema after it (the guide's section 16).
ALTER TABLE devices DROP CONSTRAINT devices_pkey,
    ADD CONSTRAINT devices_pkey PRIMARY KEY USING INDEX devices_app_token_key;
ALTER TABLE invalid_tokens DROP CONSTRAINT invalid_tokens_pkey,
    ADD CONSTRAINT invalid_tokens_pkey PRIMARY KEY USING INDEX invalid_tokens_app_token_key;
