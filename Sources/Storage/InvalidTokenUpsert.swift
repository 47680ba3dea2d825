import Foundation
package import PostgresNIO

/// The upsert of invalid-token reports (APNs' 410 and error 8 from the push daemon, feedback tuples from the feedback
/// job): the newest report of a token in an app wins and is handled again.
package enum InvalidTokenUpsert {
    /// Keyed by (app, device_token), the key after `migrate --contract` (012): the same token in two apps is two
    /// reports. With `keyedByToken`, the key from before it: a token has one report, and a newer one of another app
    /// takes it over (a token then belongs to one app).
    package static func statement(_ tokens: [PushQueue.InvalidToken], keyedByToken: Bool) -> PostgresQuery {
        // Apple's time as text ('' for none: then the database's clock, now(), not the daemon's).
        let times = tokens.map { $0.reportedAt.map { Date.ISO8601FormatStyle(includingFractionalSeconds: true).format($0) } ?? "" }
        let distinct = keyedByToken ? "t" : "a, t"
        let conflict =
            keyedByToken ? "(device_token) DO UPDATE SET app = EXCLUDED.app," : "(app, device_token) DO UPDATE SET"
        // APNs tokens in lower-case hex; an FCM token is case-sensitive and kept as FCM gave it.
        return """
            INSERT INTO invalid_tokens (app, device_token, reported_at, source)
            SELECT DISTINCT ON (\(unescaped: distinct)) a, t, coalesce(nullif(r, '')::timestamptz, now()), s
            FROM (
                SELECT a, CASE WHEN t ~ '^[0-9A-Fa-f]+$' THEN lower(t) ELSE t END AS t, r, s
                FROM unnest(\(tokens.map(\.app))::text[], \(tokens.map(\.token))::text[], \(times)::text[], \(tokens.map(\.source))::text[])
                    AS i(a, t, r, s)
            ) i
            ORDER BY \(unescaped: distinct), 3 DESC
            ON CONFLICT \(unescaped: conflict)
                reported_at = greatest(invalid_tokens.reported_at, EXCLUDED.reported_at),
                source = EXCLUDED.source, processed_at = NULL
            """
    }

    /// Whether `error` is the key from before `migrate --contract` refusing a report of a token another app's report
    /// holds (unique_violation: the statement keyed by (app, device_token) cannot take it over). Nothing was written;
    /// the statement keyed by token records it.
    package static func isOldKeyConflict(_ error: any Error) -> Bool { DatabaseError.sqlState(of: error) == "23505" }
}
