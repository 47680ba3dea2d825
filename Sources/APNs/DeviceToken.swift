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

    /// A binary-interface token (32 bytes) held inline: a frame keeps it without an allocation of its own.
    package struct Binary: Sendable, Equatable {
        private let words: (UInt64, UInt64, UInt64, UInt64)

        /// From exactly 64 hex digits (either case), else nil.
        package init?(hex: String) {
            var hex = hex
            // Read in place (a native string's UTF-8 is contiguous): no copy of the digits per row.
            let words = hex.withUTF8 { utf8 -> (UInt64, UInt64, UInt64, UInt64)? in
                guard utf8.count == DeviceToken.binaryLength * 2 else { return nil }
                var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
                var invalid: UInt8 = 0
                withUnsafeMutableBytes(of: &words) { bytes in
                    for index in 0..<DeviceToken.binaryLength {
                        let high = Self.nibble(utf8[2 * index])
                        let low = Self.nibble(utf8[2 * index + 1])
                        invalid |= (high | low) & 0xF0
                        bytes[index] = high &<< 4 | low
                    }
                }
                return invalid == 0 ? words : nil
            }
            guard let words else { return nil }
            self.words = words
        }

        /// One hex digit's value, or 0xFF (here, not `Support`'s: called across modules it was not inlined).
        @inline(__always)
        private static func nibble(_ byte: UInt8) -> UInt8 {
            let digit = byte &- UInt8(ascii: "0")
            if digit < 10 { return digit }
            let letter = (byte | 0x20) &- UInt8(ascii: "a")
            return letter < 6 ? letter &+ 10 : 0xFF
        }

        /// Its 32 bytes, in order.
        package func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
            try Swift.withUnsafeBytes(of: words, body)
        }

        package static func == (lhs: Binary, rhs: Binary) -> Bool {
            lhs.words.0 == rhs.words.0 && lhs.words.1 == rhs.words.1 && lhs.words.2 == rhs.words.2 && lhs.words.3 == rhs.words.3
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
