import APNs
import Settings
import Support

/// Splits a plain-SQL file into statements, because PostgreSQL's extended query protocol (which PostgresNIO
/// speaks) takes one statement at a time.
///
/// Semicolons inside string literals (`'…'`, `E'…'`), quoted identifiers (`"…"`), dollar-quoted bodies
/// (`$$…$$`, `$tag$…$tag$`), line comments (`-- …`) and nested block comments (`/* … */`) do not split.
package struct SQLScript: Sendable, Equatable {
    /// The statements, trimmed, without their terminating semicolons; comment-only pieces are dropped.
    package let statements: [String]

    package init(_ text: String) {
        let bytes = Array(text.utf8)
        var statements: [String] = []
        var start = 0
        var index = 0
        var hasCode = false

        func flush(upTo end: Int) {
            if hasCode, let statement = String(validating: bytes[start..<end], as: UTF8.self) {
                let trimmed = statement.trimmingWhitespace()
                if !trimmed.isEmpty { statements.append(trimmed) }
            }
            hasCode = false
        }

        while index < bytes.count {
            let byte = bytes[index]
            let isComment =
                (byte == UInt8(ascii: "-") && Self.byte(bytes, index + 1) == UInt8(ascii: "-"))
                || (byte == UInt8(ascii: "/") && Self.byte(bytes, index + 1) == UInt8(ascii: "*"))
            if !hasCode && !isComment && byte > 32 {
                // A statement starts at its first code byte: comments before it are not part of it.
                start = index
            }
            switch byte {
            case UInt8(ascii: "'"), UInt8(ascii: "\""):
                hasCode = true
                index = Self.skipQuoted(bytes, from: index, quote: byte)
            case UInt8(ascii: "-") where Self.byte(bytes, index + 1) == UInt8(ascii: "-"):
                while index < bytes.count && bytes[index] != UInt8(ascii: "\n") { index += 1 }
            case UInt8(ascii: "/") where Self.byte(bytes, index + 1) == UInt8(ascii: "*"):
                index = Self.skipBlockComment(bytes, from: index)
            case UInt8(ascii: "$"):
                hasCode = true
                if let tagEnd = Self.dollarTagEnd(bytes, from: index) {
                    let tag = bytes[index...tagEnd]
                    index = Self.find(tag, in: bytes, from: tagEnd + 1).map { $0 + tag.count } ?? bytes.count
                } else {
                    index += 1
                }
            case UInt8(ascii: ";"):
                flush(upTo: index)
                index += 1
                start = index
            default:
                if byte > 32 { hasCode = true }
                index += 1
            }
        }
        flush(upTo: bytes.count)
        self.statements = statements
    }

    private static func byte(_ bytes: [UInt8], _ index: Int) -> UInt8? {
        index < bytes.count ? bytes[index] : nil
    }

    /// Index just past the closing quote; a doubled quote is an escaped quote, and a backslash escapes in `E'…'`.
    private static func skipQuoted(_ bytes: [UInt8], from start: Int, quote: UInt8) -> Int {
        let backslashEscapes =
            quote == UInt8(ascii: "'") && start > 0
            && (bytes[start - 1] == UInt8(ascii: "E") || bytes[start - 1] == UInt8(ascii: "e"))
        var index = start + 1
        while index < bytes.count {
            if backslashEscapes && bytes[index] == UInt8(ascii: "\\") {
                index += 2
                continue
            }
            if bytes[index] == quote {
                if byte(bytes, index + 1) == quote {
                    index += 2
                    continue
                }
                return index + 1
            }
            index += 1
        }
        return bytes.count
    }

    private static func skipBlockComment(_ bytes: [UInt8], from start: Int) -> Int {
        var depth = 0
        var index = start
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "/") && byte(bytes, index + 1) == UInt8(ascii: "*") {
                depth += 1
                index += 2
            } else if bytes[index] == UInt8(ascii: "*") && byte(bytes, index + 1) == UInt8(ascii: "/") {
                depth -= 1
                index += 2
                if depth == 0 { return index }
            } else {
                index += 1
            }
        }
        return bytes.count
    }

    /// If a dollar-quote tag (`$$` or `$name$`) starts at `start`, the index of its closing `$`.
    private static func dollarTagEnd(_ bytes: [UInt8], from start: Int) -> Int? {
        if start > 0 {
            let previous = bytes[start - 1]
            // `$1` parameters and identifiers containing `$` are not quotes.
            if previous == UInt8(ascii: "_") || isIdentifierByte(previous) { return nil }
        }
        var index = start + 1
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "$") { return index }
            let isDigit = byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
            guard isIdentifierByte(byte) || (isDigit && index > start + 1) else { return nil }
            index += 1
        }
        return nil
    }

    private static func isIdentifierByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || byte == UInt8(ascii: "_") || byte >= 0x80
    }

    private static func find(_ needle: ArraySlice<UInt8>, in bytes: [UInt8], from start: Int) -> Int? {
        guard needle.count <= bytes.count else { return nil }
        var index = start
        while index + needle.count <= bytes.count {
            if bytes[index..<index + needle.count].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }
}
