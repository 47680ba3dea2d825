import Support

/// What the hourly prune job (`pushchat-api queue prune`) deletes besides old `push_queue` rows. Zero keeps forever.
package struct RetentionSettings: Sendable, Equatable {
    /// Chat messages older than this (`retention_messages`). Default 30 days.
    package var messages: Duration = .seconds(30 * 86_400)
    /// Users that never got a device token ("0") this long after joining (`retention_tokenless_users`). Default 30 days.
    package var tokenlessUsers: Duration = .seconds(30 * 86_400)
    /// Invalid-token reports the feedback job handled this long ago (`retention_invalid_tokens`). Default 30 days.
    package var invalidTokens: Duration = .seconds(30 * 86_400)

    package init() {}

    init(source: ConfigurationSource) throws(ConfigurationError) {
        messages = try Configuration.duration(.retentionMessages, source, zeroMeans: "keep forever") ?? messages
        tokenlessUsers = try Configuration.duration(.retentionTokenlessUsers, source, zeroMeans: "keep forever") ?? tokenlessUsers
        invalidTokens = try Configuration.duration(.retentionInvalidTokens, source, zeroMeans: "keep forever") ?? invalidTokens
    }
}
