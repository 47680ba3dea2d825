import Testing

@testable import Push

/// What the log says when the token URI refuses: OAuth's error and its description, never a token.
@Suite struct AccessTokenErrorTests {
    @Test func anOAuthErrorIsItsErrorAndDescription() {
        let body = Array(#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#.utf8)
        #expect(AccessTokens.errorText(body) == "invalid_grant: Invalid JWT Signature.")
        #expect(AccessTokens.errorText(Array(#"{"error":"unauthorized_client"}"#.utf8)) == "unauthorized_client")
        #expect(AccessTokens.errorText(Array(String(repeating: "e", count: 500).utf8)).count == 200)
    }
}
