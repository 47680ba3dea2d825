import PostgresNIO

/// A browser's push subscription as `web_subscriptions` keeps it: what a web token (`web_…`) stands for. Checked by
/// the caller (the API reads it from `PushSubscription.toJSON()`); written in the statement that registers the device
/// or chat user naming it, so that neither is stored without the other.
package struct WebSubscriptionRecord: Sendable, Equatable {
    /// `web_` and the base64url SHA-256 of the endpoint.
    package let token: String
    package let endpoint: String
    /// base64url of the browser's uncompressed P-256 point.
    package let p256dh: String
    /// base64url of the browser's 16-byte secret.
    package let auth: String

    package init(token: String, endpoint: String, p256dh: String, auth: String) {
        self.token = token
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
    }

    /// The upsert a registering statement runs as a CTE after its parameters `$first…$first+2` (endpoint, p256dh,
    /// auth; NULL for any other platform) and the token at `$token`, when `condition` (SQL) holds: a browser
    /// subscribing again with the same endpoint replaces its keys.
    static func upsert(token: Int, first: Int, condition: String) -> String {
        """
        INSERT INTO web_subscriptions (device_token, endpoint, p256dh, auth)
        SELECT $\(token), $\(first)::text, $\(first + 1)::text, $\(first + 2)::text WHERE $\(first)::text IS NOT NULL AND \(condition)
        ON CONFLICT (device_token) DO UPDATE SET
            endpoint = EXCLUDED.endpoint, p256dh = EXCLUDED.p256dh, auth = EXCLUDED.auth, updated_at = now()
        RETURNING 1
        """
    }

    /// Appends the endpoint, p256dh and auth of `record` (three NULLs without one).
    static func append(_ record: WebSubscriptionRecord?, to bindings: inout PostgresBindings) {
        if let record {
            bindings.append(record.endpoint)
            bindings.append(record.p256dh)
            bindings.append(record.auth)
        } else {
            for _ in 0..<3 { bindings.appendNull() }
        }
    }
}
