package import Foundation

/// The `Authorization` headers one VAPID key gives, one per push service's origin, each reused until half of its
/// lifetime has passed (RFC 8292 allows up to 24 hours; ``VAPIDToken/lifetime`` is 12): one ECDSA signature per origin
/// every six hours rather than one per message. Bounded: past ``maximumOrigins`` the expired entries go first, then
/// the oldest (endpoints name their hosts, and a registration may name any).
package struct VAPIDTokenCache: Sendable {
    package let key: VAPIDKey
    package let subject: String
    package static let maximumOrigins = 1_024

    private var entries: [String: Entry] = [:]

    private struct Entry: Sendable {
        let authorization: String
        let expires: Int64
    }

    package init(key: VAPIDKey, subject: String) {
        self.key = key
        self.subject = subject
    }

    /// How many origins have a token now.
    package var count: Int { entries.count }

    /// The `Authorization` for a request to `origin` at `now`: the cached one while more than half its life is left,
    /// else a new token.
    package mutating func authorization(for origin: String, now: Date) throws(WebPushError) -> String {
        let seconds = Int64(now.timeIntervalSince1970)
        if let entry = entries[origin], entry.expires - seconds > VAPIDToken.lifetime / 2 { return entry.authorization }
        let token = VAPIDToken(audience: origin, expires: seconds + VAPIDToken.lifetime, subject: subject)
        let authorization = try token.authorization(signedWith: key)
        if entries[origin] == nil, entries.count >= Self.maximumOrigins { evict(now: seconds) }
        entries[origin] = Entry(authorization: authorization, expires: token.expires)
        return authorization
    }

    /// The push service refused the token (401/403): the next request to `origin` signs a new one.
    package mutating func forget(_ origin: String) { entries[origin] = nil }

    private mutating func evict(now: Int64) {
        entries = entries.filter { $0.value.expires - now > VAPIDToken.lifetime / 2 }
        if entries.count >= Self.maximumOrigins, let oldest = entries.min(by: { $0.value.expires < $1.value.expires })?.key {
            entries[oldest] = nil
        }
    }
}
