import APNs
import Crypto
import Foundation
import Support

/// Provider API keys: `pck_` and 43 base64url characters (256 random bits). Only their SHA-256 is stored, so a
/// copy of the database does not hold usable keys.
package enum APIKey {
    package static let prefix = "pck_"

    /// A new random key.
    package static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return prefix + Base64URL.encode(bytes)
    }

    /// The stored form: SHA-256 of the key's UTF-8, lower-case hex.
    package static func hash(_ key: String) -> String {
        DeviceToken.hex(SHA256.hash(data: Array(key.utf8)))
    }

    /// A key name: 1 to 64 of letters, digits, `.`, `-`, `_`, starting with a letter or digit.
    package static func isValidName(_ name: String) -> Bool {
        guard let first = name.utf8.first, name.utf8.count <= 64, isAlphanumeric(first) else { return false }
        return name.utf8.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }

    static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }
}
