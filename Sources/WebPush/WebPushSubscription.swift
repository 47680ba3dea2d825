package import Crypto
package import Foundation
import Support

/// A browser's push subscription, as `PushSubscription.toJSON()` gives it: `{"endpoint": "https://…", "keys":
/// {"p256dh": <base64url of the 65-byte uncompressed P-256 point>, "auth": <base64url of 16 bytes>}}`. The endpoint's
/// host is the browser's push service, never chosen by this server: an untrusted URL (its addresses are checked where
/// it is registered and again before each send, by the caller).
package struct WebPushSubscription: Sendable, Equatable {
    /// The push resource: `POST` here delivers to the browser.
    package let endpoint: URL
    /// The browser's ECDH public key (`keys.p256dh`).
    package let userAgentKey: P256.KeyAgreement.PublicKey
    /// The browser's authentication secret (`keys.auth`), 16 bytes.
    package let authSecret: [UInt8]
    /// ``userAgentKey`` as its 65 uncompressed bytes, serialized once (every message's keys mix them in).
    package let userAgentPublic: [UInt8]
    /// The endpoint's host, as the address check and TLS's server name take it (an IPv6 literal without brackets).
    package let host: String
    /// The endpoint's port (443 unless it names another).
    package let port: Int
    /// The push service's origin, `https://host[:port]`: a VAPID token's audience, and what one connection serves.
    package let origin: String
    /// `host[:port]` (the port only when not 443), a request's `:authority`.
    package let requestAuthority: String
    /// The endpoint's path and query, percent-encoded as it came: a request's `:path`.
    package let path: String

    /// The most an endpoint URL may hold (push services' are under 500 characters).
    package static let maximumEndpointLength = 1_024

    package init(endpoint: URL, userAgentKey: P256.KeyAgreement.PublicKey, authSecret: [UInt8]) throws(WebPushError) {
        try self.init(
            endpoint: endpoint,
            userAgentKey: userAgentKey,
            userAgentPublic: Array(userAgentKey.x963Representation),
            authSecret: authSecret
        )
    }

    /// A subscription from its stored fields (`keys.p256dh` and `keys.auth` as browsers write them), checked as
    /// ``init(json:)`` checks them; the browser's key kept as the bytes it came as (serializing a parsed point again
    /// costs a field inversion, per subscription a claim reads).
    package init(endpoint: URL, p256dh: String, auth: String) throws(WebPushError) {
        let (key, bytes) = try Self.decodedUserAgentKey(p256dh)
        try self.init(endpoint: endpoint, userAgentKey: key, userAgentPublic: bytes, authSecret: try Self.authSecret(auth))
    }

    private init(
        endpoint: URL,
        userAgentKey: P256.KeyAgreement.PublicKey,
        userAgentPublic: [UInt8],
        authSecret: [UInt8]
    ) throws(WebPushError) {
        try Self.check(endpoint)
        guard authSecret.count == 16 else {
            throw WebPushError(code: .badKeys, reason: "keys.auth is 16 bytes, not \(authSecret.count)")
        }
        self.endpoint = endpoint
        self.userAgentKey = userAgentKey
        self.authSecret = authSecret
        self.userAgentPublic = userAgentPublic
        // Read from the URL once: every message to the browser names them.
        let host = endpoint.host ?? ""
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        port = endpoint.port ?? 443
        let name = self.host.contains(":") ? "[\(self.host)]" : self.host
        origin = "https://" + name.lowercased() + (port == 443 ? "" : ":\(port)")
        requestAuthority = port == 443 ? name : "\(name):\(port)"
        let components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false)
        let encodedPath = components?.percentEncodedPath ?? "/"
        path = (encodedPath.isEmpty ? "/" : encodedPath) + (components?.percentEncodedQuery.map { "?" + $0 } ?? "")
    }

    /// Reads the JSON a browser's `PushSubscription.toJSON()` gives (`expirationTime` and other members are ignored).
    package init(json: [UInt8]) throws(WebPushError) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any] else {
            throw WebPushError(code: .badSubscription, reason: "a subscription is a JSON object, as PushSubscription.toJSON() gives it")
        }
        guard let text = object["endpoint"] as? String else {
            throw WebPushError(code: .badSubscription, reason: "a subscription needs \"endpoint\" (a string)")
        }
        guard let keys = object["keys"] as? [String: Any], let p256dh = keys["p256dh"] as? String, let auth = keys["auth"] as? String
        else {
            throw WebPushError(code: .badSubscription, reason: "a subscription needs \"keys\" with \"p256dh\" and \"auth\" (strings)")
        }
        guard text.utf8.count <= Self.maximumEndpointLength, let endpoint = URL(string: text) else {
            throw WebPushError(code: .badEndpoint, reason: "the endpoint is not a URL of at most \(Self.maximumEndpointLength) characters")
        }
        try self.init(endpoint: endpoint, p256dh: p256dh, auth: auth)
    }

    /// `keys.p256dh`: base64url (browsers omit the padding; a padded one is taken too) of an uncompressed point that
    /// lies on P-256.
    package static func userAgentKey(_ text: String) throws(WebPushError) -> P256.KeyAgreement.PublicKey {
        try decodedUserAgentKey(text).key
    }

    /// ``userAgentKey(_:)`` and the point's 65 bytes as they came.
    private static func decodedUserAgentKey(_ text: String) throws(WebPushError) -> (key: P256.KeyAgreement.PublicKey, bytes: [UInt8]) {
        guard let bytes = Self.base64URL(text) else {
            throw WebPushError(code: .badKeys, reason: "keys.p256dh is not base64url")
        }
        guard bytes.count == 65, bytes.first == 0x04 else {
            throw WebPushError(
                code: .badKeys,
                reason: "keys.p256dh is an uncompressed P-256 point (65 bytes starting 0x04), not \(bytes.count) bytes"
            )
        }
        do {
            return (try P256.KeyAgreement.PublicKey(x963Representation: bytes), bytes)
        } catch {
            throw WebPushError(code: .badKeys, reason: "keys.p256dh is not a point on P-256")
        }
    }

    /// `keys.auth`: base64url of 16 bytes.
    package static func authSecret(_ text: String) throws(WebPushError) -> [UInt8] {
        guard let bytes = Self.base64URL(text) else { throw WebPushError(code: .badKeys, reason: "keys.auth is not base64url") }
        guard bytes.count == 16 else { throw WebPushError(code: .badKeys, reason: "keys.auth is 16 bytes, not \(bytes.count)") }
        return bytes
    }

    /// An https URL with a host, no credentials, no fragment.
    static func check(_ endpoint: URL) throws(WebPushError) {
        guard endpoint.scheme?.lowercased() == "https" else {
            throw WebPushError(code: .badEndpoint, reason: "the endpoint is not an https URL")
        }
        guard let host = endpoint.host, !host.isEmpty else {
            throw WebPushError(code: .badEndpoint, reason: "the endpoint has no host")
        }
        guard endpoint.user == nil, endpoint.password == nil else {
            throw WebPushError(code: .badEndpoint, reason: "the endpoint carries credentials")
        }
        guard endpoint.fragment == nil else {
            throw WebPushError(code: .badEndpoint, reason: "the endpoint has a fragment")
        }
    }

    /// The device's token: `web_` and the base64url SHA-256 of the endpoint (47 characters). What `devices`,
    /// `active_users` and `push_queue` hold for a browser, what DELETE and a `tokens` target take; the same endpoint
    /// subscribed again with new keys keeps its token.
    package var token: String { Self.token(endpoint: endpoint.absoluteString) }

    /// The token for an endpoint URL as stored.
    package static func token(endpoint: String) -> String {
        tokenPrefix + Base64URL.encode(Array(SHA256.hash(data: Array(endpoint.utf8))))
    }

    /// What every web token starts with.
    package static let tokenPrefix = "web_"

    /// Whether `text` has a web token's shape (`web_` and 43 base64url characters).
    package static func isToken(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard utf8.count == 47, text.hasPrefix(tokenPrefix) else { return false }
        return utf8.dropFirst(4).allSatisfy { byte in
            (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || byte == 0x2D || byte == 0x5F
        }
    }

    /// `keys.p256dh` as browsers write it (base64url without padding).
    package var p256dh: String { Base64URL.encode(userAgentPublic) }

    /// `keys.auth` as browsers write it.
    package var auth: String { Base64URL.encode(authSecret) }

    /// The subscription as `PushSubscription.toJSON()` gives it, members in a fixed order: what the device's row keeps.
    package var json: String {
        #"{"endpoint":"# + JSONText.quoted(endpoint.absoluteString) + #","keys":{"p256dh":""# + p256dh + #"","auth":""# + auth + #""}}"#
    }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.endpoint == rhs.endpoint && lhs.authSecret == rhs.authSecret
            && lhs.userAgentPublic == rhs.userAgentPublic
    }

    /// base64url with or without `=` padding; nil when it is not.
    private static func base64URL(_ text: String) -> [UInt8]? {
        var trimmed = Substring(text)
        while trimmed.hasSuffix("=") { trimmed = trimmed.dropLast() }
        return Base64URL.decode(String(trimmed))
    }
}
