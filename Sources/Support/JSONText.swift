/// Minimal JSON string escaping, keeping non-ASCII as UTF-8.
package enum JSONText {
    /// `scalar` as it appears inside a JSON string.
    package static func escape(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "\"": return "\\\""
        case "\\": return "\\\\"
        case "\n": return "\\n"
        case "\r": return "\\r"
        case "\t": return "\\t"
        case "\u{08}": return "\\b"
        case "\u{0C}": return "\\f"
        case let control where control.value < 0x20:
            let hex = String(control.value, radix: 16)
            return "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default:
            return String(scalar)
        }
    }

    /// `text` as a quoted JSON string.
    package static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            if scalar.value >= 0x20 && scalar != "\"" && scalar != "\\" {
                result.unicodeScalars.append(scalar)
            } else {
                result += escape(scalar)
            }
        }
        return result + "\""
    }
}
