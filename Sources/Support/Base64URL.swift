import Foundation

/// base64url without padding (RFC 7515 §2, RFC 4648 §5): the alphabet `A–Z a–z 0–9 - _`, no `=`.
package enum Base64URL {
    package static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The bytes of `text`, or nil when it is not base64url without padding as ``encode(_:)`` writes it: another
    /// character (`+`, `/`, `=`, white space), a length no encoding has (one past a multiple of four), or unused bits
    /// set. One text, one meaning: a signature or a key is never accepted in a second spelling.
    package static func decode(_ text: String) -> [UInt8]? {
        var base64 = ""
        base64.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                base64.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "-"): base64 += "+"
            case UInt8(ascii: "_"): base64 += "/"
            default: return nil
            }
        }
        guard base64.utf8.count % 4 != 1 else { return nil }
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        // The last character's unused bits are zero (`Zg`, not `Zh`, for "f"): the canonical spelling only.
        guard let bytes = Data(base64Encoded: base64).map(Array.init), encode(bytes) == text else { return nil }
        return bytes
    }
}
