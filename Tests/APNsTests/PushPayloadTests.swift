import Foundation
import Testing

@testable import APNs

@Suite struct PushPayloadTests {
    func alert(_ payload: String) throws -> String {
        let object = try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any]
        let aps = try #require(object?["aps"] as? [String: Any])
        #expect(aps["sound"] as? String == "default")
        return try #require(aps["alert"] as? String)
    }

    @Test func theTutorialsShape() {
        #expect(PushPayload.chat(name: "Bob", text: "Hi there") == #"{"aps":{"alert":"Bob: Hi there","sound":"default"}}"#)
    }

    @Test func escapesQuotesBackslashesAndNewlines() throws {
        let payload = PushPayload.chat(name: #"A "B" \C"#, text: "one\ntwo\r")
        #expect(payload.contains(#"A \"B\" \\C: one\ntwo\r"#))
        #expect(try alert(payload) == "A \"B\" \\C: one\ntwo\r")
    }

    @Test func nonASCIIStaysUTF8() {
        let payload = PushPayload.chat(name: "Zoë", text: "Grüße 👋")
        #expect(payload == #"{"aps":{"alert":"Zoë: Grüße 👋","sound":"default"}}"#)
    }

    @Test func nameIsCutTo20BytesOnACharacterBoundary() throws {
        // 19 ASCII bytes then a 2-byte character: the character does not fit and is dropped whole.
        let name = String(repeating: "n", count: 19) + "é"
        #expect(PushPayload.escaped(name, limit: 20) == String(repeating: "n", count: 19))
        #expect(try alert(PushPayload.chat(name: name, text: "x")) == String(repeating: "n", count: 19) + ": x")
    }

    @Test func anEscapeIsNeverCut() {
        // 19 bytes, then `"` which escapes to 2 bytes: it must not become a lone backslash.
        let name = String(repeating: "n", count: 19) + "\""
        #expect(PushPayload.escaped(name, limit: 20) == String(repeating: "n", count: 19))
        #expect(PushPayload.escaped("\n\n\n", limit: 5) == "\\n\\n")
    }

    @Test func textIsCutTo190EscapedBytes() throws {
        let text = String(repeating: "\"", count: 190)  // 380 bytes once escaped
        let payload = PushPayload.chat(name: "Ann", text: text)
        #expect(try alert(payload) == "Ann: " + String(repeating: "\"", count: 95))
    }

    @Test func alwaysValidJSONWithin256Bytes() throws {
        var generator = SeededGenerator(seed: 42)
        let alphabet: [String] = ["a", "Z", " ", "\"", "\\", "\n", "\r", "é", "€", "👋", "🇩🇪", "e\u{301}", "\u{2028}", "/"]
        for _ in 0..<2000 {
            let name = (0..<Int.random(in: 1...40, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }.joined()
            let text = (0..<Int.random(in: 1...200, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }.joined()
            let payload = PushPayload.chat(name: name, text: text)
            #expect(payload.utf8.count <= PushPayload.maximumPayloadBytes)
            let decoded = try alert(payload)
            let separator = try #require(decoded.range(of: ": "))
            #expect(name.hasPrefix(decoded[..<separator.lowerBound]) || decoded.hasPrefix(": "))
        }
    }
}

/// A small deterministic generator (SplitMix64) so the randomised test repeats exactly.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
