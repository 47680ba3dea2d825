/// A JSON value that keeps what the sender wrote: object members in their order, numbers as their literal text.
/// Serializing a parsed value gives compact JSON with the same members in the same order, so a payload built from
/// a request is the request's JSON, byte for byte, less its whitespace.
package indirect enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's literal text, valid by RFC 8259's grammar (e.g. `-1.5e3`).
    case number(String)
    case string(String)
    case array([JSON])
    case object([Member])

    package struct Member: Sendable, Equatable {
        package let key: String
        package let value: JSON

        package init(_ key: String, _ value: JSON) {
            self.key = key
            self.value = value
        }
    }

    /// The member named `key` of an object (nil for other values or a missing key).
    package subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    package var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    package var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    package var members: [Member]? {
        if case .object(let members) = self { return members }
        return nil
    }

    package var elements: [JSON]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    /// The value of a number written as an integer (no fraction, no exponent) that fits 64 bits.
    package var integerValue: Int64? {
        guard case .number(let literal) = self, !literal.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) else { return nil }
        return Int64(literal)
    }

    /// A number's value (nil for other values).
    package var doubleValue: Double? {
        guard case .number(let literal) = self else { return nil }
        return Double(literal)
    }

    /// What kind of value this is, for error messages ("a string", "an object", …).
    package var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// Compact JSON text (no whitespace), members in their order, strings minimally escaped, UTF-8 kept.
    package var serialized: String {
        var output = ""
        write(to: &output)
        return output
    }

    package func write(to output: inout String) {
        switch self {
        case .null: output += "null"
        case .bool(let value): output += value ? "true" : "false"
        case .number(let literal): output += literal
        case .string(let text): output += JSONText.quoted(text)
        case .array(let elements):
            output += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { output += "," }
                element.write(to: &output)
            }
            output += "]"
        case .object(let members):
            output += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { output += "," }
                output += JSONText.quoted(member.key)
                output += ":"
                member.value.write(to: &output)
            }
            output += "}"
        }
    }
}

/// Why a text is not JSON: the byte offset and what was wrong there.
package struct JSONParseError: PushChatError, Equatable {
    package typealias Code = ErrorCode<JSONParseError>
    package var code: Code { .malformed }
    package let offset: Int
    package let reason: String
    package var description: String { "malformed JSON at byte \(offset): \(reason)" }
}

extension ErrorCode where Domain == JSONParseError {
    package static let malformed = Self("malformed")
}

extension JSON {
    /// Deepest nesting accepted: deeper input is refused rather than recursed into.
    package static let maximumDepth = 32

    /// Parses one JSON value (RFC 8259, UTF-8) surrounded by optional whitespace. Refuses, with the offset: invalid
    /// UTF-8, unpaired surrogates, control characters in strings, duplicate keys in an object, nesting deeper than
    /// ``maximumDepth``, and anything after the value.
    package static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes) throws(JSONParseError) -> JSON {
        var parser = JSONParser(bytes: Array(bytes))
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == parser.bytes.count else { throw parser.error("unexpected text after the value") }
        return value
    }

    package static func parse(_ text: String) throws(JSONParseError) -> JSON { try parse(Array(text.utf8)) }
}

struct JSONParser {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    func error(_ reason: String) -> JSONParseError { JSONParseError(offset: index, reason: reason) }

    mutating func skipWhitespace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
            index += 1
        }
    }

    mutating func value(depth: Int) throws(JSONParseError) -> JSON {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw error("unexpected character")
        }
    }

    mutating func literal(_ word: String) throws(JSONParseError) {
        for byte in word.utf8 {
            guard index < bytes.count else { throw error("unexpected end of input") }
            guard bytes[index] == byte else { throw error("unexpected character") }
            index += 1
        }
    }

    mutating func object(depth: Int) throws(JSONParseError) -> JSON {
        guard depth <= JSON.maximumDepth else { throw error("nested deeper than \(JSON.maximumDepth) levels") }
        index += 1
        var members: [JSON.Member] = []
        var keys = Set<String>()
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name in quotes") }
            let start = index
            let key = try string()
            guard keys.insert(key).inserted else { throw JSONParseError(offset: start, reason: "duplicate key \(JSONText.quoted(key))") }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            members.append(JSON.Member(key, try value(depth: depth)))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard bytes[index] == UInt8(ascii: "}") else { throw error("expected ',' or '}'") }
            index += 1
            return .object(members)
        }
    }

    mutating func array(depth: Int) throws(JSONParseError) -> JSON {
        guard depth <= JSON.maximumDepth else { throw error("nested deeper than \(JSON.maximumDepth) levels") }
        index += 1
        var elements: [JSON] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try value(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard bytes[index] == UInt8(ascii: "]") else { throw error("expected ',' or ']'") }
            index += 1
            return .array(elements)
        }
    }

    mutating func digits() -> Int {
        let start = index
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
        return index - start
    }

    mutating func number() throws(JSONParseError) -> String {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") else {
            throw error("expected a digit")
        }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            _ = digits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw error("expected a digit after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw error("expected a digit in the exponent") }
        }
        guard index - start <= 64 else { throw JSONParseError(offset: start, reason: "number longer than 64 characters") }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("unexpected end of input in \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("expected a hex digit in \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    mutating func string() throws(JSONParseError) -> String {
        index += 1
        var utf8: [UInt8] = []
        var runStart = index
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                utf8.append(contentsOf: bytes[runStart..<index])
                index += 1
                break
            }
            if byte < 0x20 { throw error("control character in a string (escape it)") }
            guard byte == UInt8(ascii: "\\") else {
                index += 1
                continue
            }
            utf8.append(contentsOf: bytes[runStart..<index])
            index += 1
            guard index < bytes.count else { throw error("unterminated escape") }
            let escaped = bytes[index]
            index += 1
            switch escaped {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escaped)
            case UInt8(ascii: "b"): utf8.append(0x08)
            case UInt8(ascii: "f"): utf8.append(0x0C)
            case UInt8(ascii: "n"): utf8.append(0x0A)
            case UInt8(ascii: "r"): utf8.append(0x0D)
            case UInt8(ascii: "t"): utf8.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw error("unpaired surrogate in \\u escape")
                    }
                    index += 2
                    let low = try hex4()
                    guard low >= 0xDC00 && low < 0xE000 else { throw error("unpaired surrogate in \\u escape") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    throw error("unpaired surrogate in \\u escape")
                }
                guard let unicode = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
                utf8.append(contentsOf: Array(String(unicode).utf8))
            default:
                throw error("invalid escape")
            }
            runStart = index
        }
        guard let text = String(validating: utf8, as: UTF8.self) else { throw error("invalid UTF-8 in a string") }
        return text
    }
}
