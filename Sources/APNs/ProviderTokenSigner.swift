package import Crypto
package import Foundation
import NIOConcurrencyHelpers
import Settings
import Support

/// Token-based authentication for the HTTP/2 API: an ES256 JWT signed with the team's `.p8` key.
///
/// Header `{"alg":"ES256","kid":KEY_ID}`, claims `{"iss":TEAM_ID,"iat":SECONDS}`; base64url without padding.
package struct ProviderTokenSigner: Sendable {
    package let keyID: String
    package let teamID: String
    let key: P256.Signing.PrivateKey

    package init(keyID: String, teamID: String, key: P256.Signing.PrivateKey) {
        self.keyID = keyID
        self.teamID = teamID
        self.key = key
    }

    /// Reads the `.p8` file (PKCS#8 PEM of an EC P-256 key).
    package init(keyFile: String, keyID: String, teamID: String) throws(CertificateError) {
        let pem: String
        do {
            pem = try String(contentsOfFile: keyFile, encoding: .utf8)
        } catch {
            throw CertificateError(code: .unreadableFile, path: keyFile, reason: "cannot read the signing key")
        }
        do {
            self.init(keyID: keyID, teamID: teamID, key: try P256.Signing.PrivateKey(pemRepresentation: pem))
        } catch {
            throw CertificateError(
                code: .noPrivateKey,
                path: keyFile,
                reason: "not an EC P-256 private key in PEM (the .p8 file from Apple)"
            )
        }
    }

    /// A token issued at `issuedAt`.
    package func token(issuedAt: Date) throws -> String {
        let header = Base64URL.encode(Array(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
        let claims = Base64URL.encode(Array(#"{"iss":"\#(teamID)","iat":\#(Int64(issuedAt.timeIntervalSince1970))}"#.utf8))
        let signingInput = header + "." + claims
        let signature = try key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }
}
