package import Support

/// A Web Push value that cannot be used: a subscription whose endpoint or keys are wrong, a VAPID key or subject that
/// cannot sign, a message too large for one record, a body that does not decrypt. The description never holds a key.
package struct WebPushError: PushChatError, Equatable {
    package typealias Code = ErrorCode<WebPushError>

    package let code: Code
    package let reason: String

    package init(code: Code, reason: String) {
        self.code = code
        self.reason = reason
    }

    package var description: String { reason }
}

extension ErrorCode where Domain == WebPushError {
    /// Not `{"endpoint", "keys": {"p256dh", "auth"}}` as `PushSubscription.toJSON()` gives it.
    package static let badSubscription = Self("badSubscription")
    /// The endpoint is not an https URL with a host, or its host does not resolve.
    package static let badEndpoint = Self("badEndpoint")
    /// The endpoint's host is, or resolves to, an address inside the network, and is not listed in
    /// `webpush_private_hosts`.
    package static let insideNetwork = Self("insideNetwork")
    /// `p256dh` is not an uncompressed P-256 point on the curve, or `auth` is not 16 bytes.
    package static let badKeys = Self("badKeys")
    /// The VAPID key file is not a P-256 private key, or the subject is not `mailto:` or `https:`.
    package static let badVAPID = Self("badVAPID")
    /// The encrypted body would exceed the 4,096 bytes every push service takes.
    package static let tooLarge = Self("tooLarge")
    /// A body that is not aes128gcm as RFC 8188 frames it, or whose record does not open with these keys.
    package static let undecryptable = Self("undecryptable")
}
