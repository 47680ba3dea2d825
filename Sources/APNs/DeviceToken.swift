import Support

/// Hex ↔ bytes for APNs device tokens.
package enum DeviceToken {
    /// The binary interface's token size.
    package static let binaryLength = 32

    /// The bytes of an even-length hex string, or `nil` if it is not hex.
    package static func bytes(hex: String) -> [UInt8]? {
        var hex = hex
        // Read in place (a native string's UTF-8 is contiguous): no copy of the digits per row.
        return hex.withUTF8 { utf8 -> [UInt8]? in
            guard utf8.count % 2 == 0 else { return nil }
            var valid = true
            let bytes = [UInt8](unsafeUninitializedCapacity: utf8.count / 2) { buffer, count in
                var index = 0
                while index < utf8.count {
                    guard let high = Hex.value(utf8[index]), let low = Hex.value(utf8[index + 1]) else {
                        valid = false
                        break
                    }
                    buffer[index / 2] = high << 4 | low
                    index += 2
                }
                count = valid ? utf8.count / 2 : 0
            }
            return valid ? bytes : nil
        }
    }

    /// Lower-case hex of `bytes`.
    package static func hex<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        var utf8: [UInt8] = []
        for byte in bytes {
            utf8.append(Hex.lowercaseDigit(byte >> 4))
            utf8.append(Hex.lowercaseDigit(byte & 0x0F))
        }
        return String(decoding: utf8, as: UTF8.self)
    }

    /// The first and last few hex digits, for logs at info level (a full token identifies a device).
    package static func redacted(_ hex: String) -> String {
        guard hex.count > 12 else { return hex }
        return "\(hex.prefix(6))…\(hex.suffix(4))"
    }
}
