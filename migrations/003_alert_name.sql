-- PushChat Server: queue a chat message in one statement.
-- The nickname as it appears in notifications (JSON-escaped and cut to 20 bytes, computed by the API at join) is
-- kept with the user, so cmd=message stores the message and fans it out without first reading the sender.

ALTER TABLE active_users ADD COLUMN alert_name text;

COMMENT ON COLUMN active_users.alert_name IS
    'The nickname as it appears in notifications: JSON-escaped and cut to 20 bytes (set by the API at join; NULL for rows joined before this column existed, filled in on their next message).';
