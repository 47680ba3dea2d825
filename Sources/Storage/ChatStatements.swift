import APNs
import PostgresNIO
import Settings

/// The API's hot statements, prepared once per connection so PostgreSQL does not plan them on every request
/// (planning was half of a `message`'s cost in the database).
enum ChatStatements {
    /// `join`: register the device, replacing any earlier registration of the udid.
    struct Join: PostgresPreparedStatement {
        static let sql = """
            WITH joined AS (
                INSERT INTO active_users AS u (udid, device_token, nickname, alert_name, secret_code, ip_address, platform)
                SELECT $1, $2, $3, $4, $5, $6::inet, $8
                WHERE $7 = 0 OR pushchat_room_has_space($5, $1, $7)
                ON CONFLICT (udid) DO UPDATE SET
                    device_token = EXCLUDED.device_token, platform = EXCLUDED.platform, nickname = EXCLUDED.nickname,
                    alert_name = EXCLUDED.alert_name,
                    secret_code = EXCLUDED.secret_code, ip_address = EXCLUDED.ip_address,
                    joined_at = now(), token_updated_at = now()
                RETURNING 1
            ), subscription AS (
            \(WebSubscriptionRecord.upsert(token: 2, first: 9, condition: "EXISTS (SELECT 1 FROM joined)"))
            )
            SELECT 1::int4 FROM joined
            """
        /// A row when the device joined; none when the room is full.
        typealias Row = Int32

        let udid: String
        let token: String
        let name: String
        let code: String
        let platform: Platform
        let ipAddress: String?
        /// Most devices in the room, 0 for no limit.
        let maxRoomSize: Int
        /// A browser's subscription (`platform` web), stored with the join.
        var subscription: WebSubscriptionRecord? = nil

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 11)
            bindings.append(udid)
            bindings.append(token)
            bindings.append(name)
            bindings.append(PushPayload.alertName(name))
            bindings.append(code)
            if let ipAddress { bindings.append(ipAddress) } else { bindings.appendNull() }
            bindings.append(Int64(maxRoomSize))
            bindings.append(platform.rawValue)
            WebSubscriptionRecord.append(subscription, to: &bindings)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Int32 { try row.decode(Int32.self) }
    }

    /// `message`: store it and queue the payload for every other member with a token, in one statement, unless they
    /// are more than `maxRecipients` (-1: no limit; the fan-out budget reserved that many): then nothing is written.
    /// Returns the message id (nil when the sender is in no room or the recipients were too many), the rows queued,
    /// the sender's nickname when the row predates `alert_name` (nothing was written then), and the recipients.
    struct Message: PostgresPreparedStatement {
        static let sql = """
            WITH sender AS (
                SELECT nickname, alert_name, secret_code, device_token FROM active_users WHERE udid = $1
            ), recipients AS (
                SELECT DISTINCT ON (u.device_token) u.device_token, u.platform
                FROM active_users u JOIN sender s ON u.secret_code = s.secret_code
                WHERE s.alert_name IS NOT NULL AND u.udid <> $1 AND u.device_token <> '0' AND u.device_token <> s.device_token
            ), allowed AS (
                SELECT $5 < 0 OR (SELECT count(*) FROM recipients) <= $5 AS ok
            ), stored AS (
                INSERT INTO messages (secret_code, sender_udid, sender_name, text)
                SELECT secret_code, $1, nickname, $2 FROM sender WHERE alert_name IS NOT NULL AND (SELECT ok FROM allowed)
                RETURNING id
            ), queued AS (
                INSERT INTO push_queue (app, platform, device_token, payload)
                SELECT $6, r.platform, r.device_token,
                       CASE r.platform WHEN 'fcm' THEN $7 || s.alert_name || $8 WHEN 'web' THEN $9 || s.alert_name || $10
                                       ELSE $3 || s.alert_name || $4 END
                FROM recipients r, sender s
                WHERE (SELECT ok FROM allowed)
                RETURNING 1
            )
            SELECT (SELECT id FROM stored), (SELECT count(*) FROM queued), (SELECT nickname FROM sender WHERE alert_name IS NULL),
                   (SELECT count(*) FROM recipients)
            """
        typealias Row = (Int64?, Int64, String?, Int64)

        let udid: String
        let text: String
        /// -1: no limit.
        let maxRecipients: Int
        /// The chat API's app (`chat_app`): its credentials send the rows.
        let app: String

        func makeBindings() throws -> PostgresBindings {
            let payload = PushPayload.Chat(text: text)
            var bindings = PostgresBindings(capacity: 10)
            bindings.append(udid)
            bindings.append(text)
            bindings.append(payload.head)
            bindings.append(payload.tail)
            bindings.append(Int64(maxRecipients))
            bindings.append(app)
            bindings.append(payload.fcmHead)
            bindings.append(payload.fcmTail)
            bindings.append(payload.webHead)
            bindings.append(payload.webTail)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }
}
