import Support

/// Hex ↔ bytes for APNs device tokens.
package enum DeviceToken {
    /// The binary interface's token size.
    package static let binaryLength = 32

    /// The bytes of an even-length hex string, or `nil` if it is not hex.
    package static func bytes(hex: String) -> [UInt8]? {
        let utf8 = Array(hex.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = Hex.value(utf8[index]), let low = Hex.value(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    /// Lower-case hex of `bytes`.
    package static func hex<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var utf8: [UInt8] = []
        for byte in bytes {
            utf8.append(digits[Int(byte >> 4)])
            utf8.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: utf8, as: UTF8.self)
    }

    /// The first and last few hex digits, for logs at info level (a full token identifies a device).
    package static func redacted(_ hex: String) -> String {
        guard hex.count > 12 else { return hex }
        return "\(hex.prefix(6))…\(hex.suffix(4))"
    }
}
