import Crypto
import Foundation

/// A webhook's signing secret, as Standard Webhooks shows it: `whsec_` and the base64 of its bytes (24 to 64 random
/// bytes); the HMAC key is the bytes. Its description never shows them.
package struct WebhookSecret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    package static let prefix = "whsec_"
    package static let byteRange = 24...64

    /// The HMAC-SHA256 key.
    package let bytes: [UInt8]

    /// A fresh secret of `count` random bytes (the system's generator, through swift-crypto).
    package static func generate(count: Int = 32) -> Self {
        precondition(byteRange.contains(count), "a webhook secret has 24 to 64 bytes")
        let key = SymmetricKey(size: SymmetricKeySize(bitCount: count * 8))
        return Self(checkedBytes: key.withUnsafeBytes { Array($0) })
    }

    private init(checkedBytes: [UInt8]) { self.bytes = checkedBytes }

    /// Reads `whsec_<base64>`: refused (without echoing it) when the prefix, the base64 or the length is wrong.
    package init(parsing text: String) throws {
        guard text.hasPrefix(Self.prefix) else {
            throw WebhookError(code: .badSecret, reason: "a webhook secret starts with \(Self.prefix)")
        }
        guard let data = Data(base64Encoded: String(text.dropFirst(Self.prefix.count))) else {
            throw WebhookError(code: .badSecret, reason: "a webhook secret is \(Self.prefix) followed by base64")
        }
        guard Self.byteRange.contains(data.count) else {
            throw WebhookError(
                code: .badSecret,
                reason: "a webhook secret holds \(Self.byteRange.lowerBound) to \(Self.byteRange.upperBound) bytes, not \(data.count)"
            )
        }
        self.bytes = Array(data)
    }

    /// `whsec_<base64>`: what `webhooks add` prints once and the receiver configures.
    package var text: String { Self.prefix + Data(bytes).base64EncodedString() }

    package var description: String { "whsec_***" }
    package var debugDescription: String { description }
}
