import Testing

@testable import Support

/// base64url without padding, as JWS uses it (RFC 7515 §2): RFC 4648's test vectors, its URL alphabet, and only the
/// canonical spelling decoded.
@Suite struct Base64URLTests {
    /// RFC 4648 §10, without the padding.
    static let vectors: [(String, String)] = [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy"),
    ]

    @Test func theRFCsVectorsBothWays() {
        for (plain, encoded) in Self.vectors {
            #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        }
    }

    @Test func theURLAlphabet() {
        // 0xfb 0xff is "+/8" in base64: "-_8" here.
        #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
        #expect(Base64URL.decode("-_8") == [0xfb, 0xff])
        let all = (0...255).map(UInt8.init)
        #expect(Base64URL.decode(Base64URL.encode(all)) == all)
    }

    @Test(arguments: [
        "+_8",  // base64's alphabet
        "-/8",
        "Zg==",  // padding
        "Zm9v Yg",  // white space
        "Zm9vY",  // a length no encoding has
        "Zh",  // unused bits set: "f" is Zg
        "Zm9=",
        "é",
    ])
    func anythingElseIsRefused(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }
}
