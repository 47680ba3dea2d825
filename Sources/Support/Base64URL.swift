/// base64url without padding (RFC 7515 §2, RFC 4648 §5): the alphabet `A–Z a–z 0–9 - _`, no `=`. Byte by byte, with
/// no Foundation string in between: a browser's keys are decoded for every subscription a claim reads, and a VAPID
/// token is encoded per origin.
package enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Each byte's value in the alphabet, 0xFF for a byte outside it.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(value) }
        return table
    }()

    package static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= bytes.count {
            let word = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out.append(alphabet[Int(word >> 18 & 63)])
            out.append(alphabet[Int(word >> 12 & 63)])
            out.append(alphabet[Int(word >> 6 & 63)])
            out.append(alphabet[Int(word & 63)])
            index += 3
        }
        switch bytes.count - index {
        case 1:
            let word = UInt32(bytes[index]) << 16
            out.append(alphabet[Int(word >> 18 & 63)])
            out.append(alphabet[Int(word >> 12 & 63)])
        case 2:
            let word = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            out.append(alphabet[Int(word >> 18 & 63)])
            out.append(alphabet[Int(word >> 12 & 63)])
            out.append(alphabet[Int(word >> 6 & 63)])
        default:
            break
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of `text`, or nil when it is not base64url without padding as ``encode(_:)`` writes it: another
    /// character (`+`, `/`, `=`, white space), a length no encoding has (one past a multiple of four), or unused bits
    /// set. One text, one meaning: a signature or a key is never accepted in a second spelling.
    package static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decode($0) }
    }

    /// ``decode(_:)`` of UTF-8 bytes.
    package static func decode(_ utf8: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let count = utf8.count
        guard count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(count * 3 / 4)
        var word: UInt32 = 0
        var held = 0
        for byte in utf8 {
            let value = values[Int(byte)]
            guard value != 0xFF else { return nil }
            word = word << 6 | UInt32(value)
            held += 1
            if held == 4 {
                out.append(UInt8(truncatingIfNeeded: word >> 16))
                out.append(UInt8(truncatingIfNeeded: word >> 8))
                out.append(UInt8(truncatingIfNeeded: word))
                word = 0
                held = 0
            }
        }
        // The last character's unused bits are zero (`Zg`, not `Zh`, for "f"): the canonical spelling only.
        switch held {
        case 2:
            guard word & 0xF == 0 else { return nil }
            out.append(UInt8(truncatingIfNeeded: word >> 4))
        case 3:
            guard word & 0x3 == 0 else { return nil }
            out.append(UInt8(truncatingIfNeeded: word >> 10))
            out.append(UInt8(truncatingIfNeeded: word >> 2))
        default:
            break
        }
        return out
    }
}
