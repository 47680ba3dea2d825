import PostgresNIO

extension PushQueue {
    /// The browsers' subscriptions (`web_subscriptions`) of `tokens` (web rows just claimed): what their messages are
    /// encrypted for and sent to. A token without one (pruned, or never registered) is absent from the answer.
    package func webSubscriptions(_ tokens: [String]) async throws -> [WebSubscriptionRecord] {
        guard !tokens.isEmpty else { return [] }
        let rows = try await run(
            "SELECT device_token, endpoint, p256dh, auth FROM web_subscriptions WHERE device_token = ANY(\(tokens)::text[])"
        )
        return try rows.decode((String, String, String, String).self).map {
            WebSubscriptionRecord(token: $0.0, endpoint: $0.1, p256dh: $0.2, auth: $0.3)
        }
    }
}
