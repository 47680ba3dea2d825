-- Which notifications named their device tokens (`to.tokens`), so that their status may list the tokens that failed
-- to a key without the devices:read scope: the caller gave them. For the others (users, a room, all) a failure's
-- token is listed only to keys that may read devices (issue 41: send + status read other users' tokens).
--
-- Expand only: the release before this one neither writes nor reads the column (its rows read as false).
ALTER TABLE notifications ADD COLUMN named_tokens boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN notifications.named_tokens IS
    'The request named its device tokens (to.tokens): its failures list them to the key that sent it, whatever its scopes.';
