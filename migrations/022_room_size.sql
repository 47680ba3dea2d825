-- The room-size check of a join, under a lock per room (issue 41): the count and the insert were one statement, so
-- joins at the same moment each counted the room before the others' rows were committed, and all got in. The
-- function takes a transaction-level advisory lock on the room and counts in a fresh snapshot (a VOLATILE function's
-- statements each take their own under READ COMMITTED), so a join waits for the one before it to commit and sees its
-- row. Only joins to the same room wait for each other.
--
-- Expand only: the release before this one never calls it.
CREATE FUNCTION pushchat_room_has_space(code text, joiner text, most bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    members bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('pushchat.room'), hashtext(code));
    SELECT count(*) INTO members FROM active_users WHERE secret_code = code AND udid <> joiner;
    RETURN members < most;
END
$$;
COMMENT ON FUNCTION pushchat_room_has_space(text, text, bigint) IS
    'Whether a join of joiner to room code keeps it at most most devices; waits for other joins to that room to commit.';
