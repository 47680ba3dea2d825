-- A last line under the API's size checks (issue 41): no payload larger than any push service takes can be written,
-- whatever writes it. APNs takes 4 KiB (5 KiB for VoIP), FCM 4,096 bytes, the binary interface 2 KiB: 5,120 bytes
-- holds every notification that can be sent. Before the API checked FCM's whole message, one request could copy an
-- unbounded android.notification into every Android recipient's row.
--
-- Rows written before this that are larger could never have been sent: pending ones fail with the reason, and their
-- payloads (and those of the history) become '{}' so that no later update or move trips over the constraint; a
-- broadcast still being expanded with one is canceled. The constraints are then added NOT VALID: every new row and
-- row version is checked, without a second scan of the tables under an exclusive lock.
--
-- Expand only: the release before this one still runs on the schema (its API may accept a request this refuses;
-- its insert then fails, and the request is answered with an error: nothing written).
UPDATE push_queue
   SET payload = '{}',
       time_failed = coalesce(time_failed, now()),
       last_error = coalesce(last_error, 'payload of ' || octet_length(payload) || ' bytes: more than any push service takes (5120)')
 WHERE octet_length(payload) > 5120;
UPDATE push_history SET payload = '{}' WHERE octet_length(payload) > 5120;
UPDATE notifications
   SET canceled_at = coalesce(canceled_at, now()),
       payload = CASE WHEN octet_length(payload) > 5120 THEN '{}' ELSE payload END,
       fcm_payload = CASE WHEN octet_length(fcm_payload) > 5120 THEN NULL ELSE fcm_payload END
 WHERE octet_length(payload) > 5120 OR octet_length(fcm_payload) > 5120;

ALTER TABLE push_queue ADD CONSTRAINT push_queue_payload_size CHECK (octet_length(payload) <= 5120) NOT VALID;
ALTER TABLE push_history ADD CONSTRAINT push_history_payload_size CHECK (octet_length(payload) <= 5120) NOT VALID;
ALTER TABLE notifications ADD CONSTRAINT notifications_payload_size
    CHECK (octet_length(payload) <= 5120 AND octet_length(fcm_payload) <= 5120) NOT VALID;
