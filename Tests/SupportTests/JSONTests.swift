import Testing

@testable import Support

@Suite struct JSONTests {
    @Test func serializingKeepsMemberOrderAndNumberLiterals() throws {
        let text = #"{ "z": 1, "a": [true, false, null, -0.5e3, 10], "m": {"é": "line\nbreak \"q\" \\ \/ \u00e9 \ud83d\ude00"} }"#
        let value = try JSON.parse(text)
        #expect(value.serialized == #"{"z":1,"a":[true,false,null,-0.5e3,10],"m":{"é":"line\nbreak \"q\" \\ / é 😀"}}"#)
        #expect(try JSON.parse(value.serialized) == value)
        #expect(value["z"]?.integerValue == 1)
        #expect(value["a"]?.elements?[3].integerValue == nil, "a fraction is not an integer")
        #expect(value["a"]?.elements?[3].doubleValue == -500)
        #expect(value["missing"] == nil)
    }

    @Test(arguments: [
        ("", "unexpected end of input"),
        ("{", "expected a member name"),
        (#"{"a":1,}"#, "expected a member name"),
        (#"{"a":1 "b":2}"#, "expected ',' or '}'"),
        (#"{"a":1,"a":2}"#, "duplicate key"),
        ("[1,2", "unexpected end of input"),
        ("[1,]", "unexpected character"),
        ("01", "unexpected text after the value"),
        ("1.", "expected a digit after '.'"),
        ("1e", "expected a digit in the exponent"),
        ("-", "expected a digit"),
        ("tru", "unexpected end of input"),
        ("nul1", "unexpected character"),
        (#""abc"#, "unterminated string"),
        ("\"a\u{01}b\"", "control character"),
        (#""\x""#, "invalid escape"),
        (#""\u12zz""#, "hex digit"),
        (#""\ud83d""#, "unpaired surrogate"),
        (#""\ude00""#, "unpaired surrogate"),
        ("{} {}", "unexpected text after the value"),
        ("NaN", "unexpected character"),
    ])
    func malformedTextIsRefusedWithItsReason(text: String, reason: String) {
        #expect(throws: JSONParseError.self) { try JSON.parse(text) }
        do {
            _ = try JSON.parse(text)
        } catch {
            #expect(error.reason.contains(reason), "\(text): \(error)")
        }
    }

    @Test func invalidUTF8AndDeepNestingAreRefused() {
        #expect(throws: JSONParseError.self) { try JSON.parse([0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JSONParseError.self) { try JSON.parse([0x22, 0xFF, 0x22]) }
        let deep = String(repeating: "[", count: JSON.maximumDepth + 1) + String(repeating: "]", count: JSON.maximumDepth + 1)
        #expect(throws: JSONParseError.self) { try JSON.parse(deep) }
        let allowed = String(repeating: "[", count: JSON.maximumDepth) + String(repeating: "]", count: JSON.maximumDepth)
        #expect((try? JSON.parse(allowed)) != nil)
        #expect(throws: JSONParseError.self) { try JSON.parse(String(repeating: "[", count: 100_000)) }
    }

    @Test func controlCharactersAreEscapedWhenSerialized() {
        #expect(JSON.string("a\u{01}\u{7F}").serialized == "\"a\\u0001\u{7F}\"")
        #expect(JSON.object([.init("k", .string("\t"))]).serialized == #"{"k":"\t"}"#)
    }
}
