package import Foundation
import Support

/// An OAuth 2.0 access token from the token URI's answer `{"access_token":…,"expires_in":3599,"token_type":"Bearer"}`.
package struct AccessToken: Sendable, Equatable {
    package let value: String
    package let expires: Date

    package init(value: String, expires: Date) {
        self.value = value
        self.expires = expires
    }

    /// Parses the token endpoint's 200 body, received at `now`; nil when it is not such an answer.
    package init?(body: [UInt8], now: Date) {
        guard let json = try? JSON.parse(body), let value = json["access_token"]?.stringValue, !value.isEmpty,
            value.utf8.count <= 4096, !value.contains(where: { $0.isWhitespace || $0.isNewline }),
            let seconds = json["expires_in"]?.integerValue, seconds > 0
        else { return nil }
        self.init(value: value, expires: now.addingTimeInterval(TimeInterval(min(seconds, 86_400))))
    }
}

/// When to get a new access token: one token for every connection and request, refreshed a while before it expires
/// and when FCM answers 401 to it, and only once however many requests meet the 401 (a state machine, no I/O).
package struct AccessTokenCache: Sendable {
    /// A token this close to its expiry is refreshed (Google's libraries refresh 3 to 5 minutes early).
    package static let refreshMargin: TimeInterval = 300

    package private(set) var current: AccessToken?
    /// A refresh is under way: callers wait for it instead of starting another.
    package private(set) var refreshing = false

    package init() {}

    package enum Action: Equatable, Sendable {
        /// Use this token.
        case use(String)
        /// Get a new token (the caller is the one to do it), then call ``refreshed(_:)`` or ``refreshFailed()``.
        case refresh
        /// Another caller is getting one: wait for it.
        case wait
    }

    /// What a request about to be sent at `now` does.
    package mutating func token(now: Date) -> Action {
        if let current, current.expires.timeIntervalSince(now) > Self.refreshMargin { return .use(current.value) }
        if refreshing { return .wait }
        refreshing = true
        return .refresh
    }

    /// A new token arrived.
    package mutating func refreshed(_ token: AccessToken) {
        current = token
        refreshing = false
    }

    /// Getting a token failed: the next caller tries again.
    package mutating func refreshFailed() {
        refreshing = false
    }

    /// FCM answered 401 to a request made with `value`: forget that token, unless it was already replaced (the other
    /// requests that carried it then use the new one: one refresh, not one per request).
    package mutating func rejected(_ value: String) {
        if current?.value == value { current = nil }
    }
}
