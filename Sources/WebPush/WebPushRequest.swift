import Foundation

/// One push message as it goes on the wire (RFC 8030 §5): `POST` to the endpoint's path on its origin, the headers
/// (`TTL`, `Content-Encoding: aes128gcm`, `Urgency`, `Topic`, `Authorization: vapid …`) and the encrypted body.
package struct WebPushRequest: Sendable, Equatable {
    /// `host[:port]`, the `:authority`.
    package let authority: String
    /// The endpoint's path and query.
    package let path: String
    package let headers: [(String, String)]
    package let body: [UInt8]

    /// Encrypts `message` for `subscription` (a fresh key and salt) with the request's headers and `authorization`.
    package init(
        message: [UInt8],
        subscription: WebPushSubscription,
        headers: WebPushHeaders,
        authorization: String
    ) throws(WebPushError) {
        body = try ContentEncryption.encrypt(message, for: subscription)
        authority = subscription.requestAuthority
        path = subscription.path
        self.headers = headers.fields + [("authorization", authorization)]
    }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.authority == rhs.authority && lhs.path == rhs.path && lhs.body == rhs.body
            && lhs.headers.map { "\($0.0): \($0.1)" } == rhs.headers.map { "\($0.0): \($0.1)" }
    }
}
