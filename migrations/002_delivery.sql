-- PushChat Server: what the push daemon needs to share one queue safely and report expired tokens.

-- Leases: a daemon claims pending rows for a while (renewing the lease while they are in flight), so several daemons
-- on several machines share the queue without sending a row twice, and rows claimed by a daemon that died
-- (kill -9, power loss) go back to the queue when the lease runs out.
ALTER TABLE push_queue
    ADD COLUMN claimed_by    text,
    ADD COLUMN claimed_until timestamptz;

COMMENT ON COLUMN push_queue.claimed_by IS 'The push daemon instance (host:pid) that claimed the row for sending; NULL when never claimed.';
COMMENT ON COLUMN push_queue.claimed_until IS 'The claim''s lease: until then no other daemon takes the row. NULL or past means free to claim.';

-- What a daemon claims next: pending and unclaimed, in queue order.
CREATE INDEX push_queue_claimable_idx ON push_queue (message_id)
    WHERE time_sent IS NULL AND time_failed IS NULL AND claimed_until IS NULL;
-- Rows in flight, by lease end: the daemons return rows whose lease ran out (their daemon died) to the queue.
CREATE INDEX push_queue_in_flight_idx ON push_queue (claimed_until)
    WHERE time_sent IS NULL AND time_failed IS NULL AND claimed_until IS NOT NULL;

-- Claims and marks rewrite rows; leave room on each page so those updates stay on the page (HOT updates).
ALTER TABLE push_queue SET (fillfactor = 70);

CREATE TABLE invalid_tokens (
    device_token  text        PRIMARY KEY,
    reported_at   timestamptz NOT NULL,
    source        text        NOT NULL,
    processed_at  timestamptz
);

COMMENT ON TABLE invalid_tokens IS
    'Device tokens APNs called invalid while sending (binary status 8, HTTP/2 410/400). The feedback job deletes users whose token was last registered before reported_at, then stamps processed_at.';
COMMENT ON COLUMN invalid_tokens.device_token IS 'The token, lower-case hex.';
COMMENT ON COLUMN invalid_tokens.reported_at IS 'When APNs found the token invalid: the time of the binary error response, or the timestamp of an HTTP/2 410.';
COMMENT ON COLUMN invalid_tokens.source IS 'What reported it, e.g. binary status 8 or http2 410 Unregistered.';
COMMENT ON COLUMN invalid_tokens.processed_at IS 'When the feedback job handled the report; NULL while pending.';

CREATE INDEX invalid_tokens_pending_idx ON invalid_tokens (reported_at) WHERE processed_at IS NULL;
