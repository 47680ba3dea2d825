import Crypto
package import Foundation
import NIOConcurrencyHelpers
import Support

/// Checks provider tokens as APNs does (the simulator's side).
package struct ProviderTokenVerifier: Sendable {
    package let keyID: String
    package let teamID: String
    let key: P256.Signing.PublicKey
    /// Tokens older than this are expired. Apple: one hour.
    package var maxAge: TimeInterval = 3600

    package init(keyID: String, teamID: String, publicKeyPEM: String) throws {
        self.keyID = keyID
        self.teamID = teamID
        self.key = try P256.Signing.PublicKey(pemRepresentation: publicKeyPEM)
    }

    /// nil when valid; else Apple's reason (`InvalidProviderToken`, `ExpiredProviderToken`).
    package func check(_ token: String, now: Date = Date()) -> String? {
        guard let issuedAt = issuedAt(of: token) else { return "InvalidProviderToken" }
        return check(issuedAt: issuedAt, now: now)
    }

    /// The token's `iat` when it is an ES256 JWT for this key and team with a good signature; else nil.
    package func issuedAt(of token: String) -> Double? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Base64URL.decode(String(parts[0])),
            let claimsBytes = Base64URL.decode(String(parts[1])),
            let signatureBytes = Base64URL.decode(String(parts[2])),
            let header = try? JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: Data(claimsBytes)) as? [String: Any],
            header["alg"] as? String == "ES256", header["kid"] as? String == keyID, claims["iss"] as? String == teamID,
            let issuedAt = (claims["iat"] as? NSNumber)?.doubleValue,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
            key.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8))
        else { return nil }
        return issuedAt
    }

    /// The age check alone, for a token whose signature was verified before: nil or `ExpiredProviderToken`.
    package func check(issuedAt: Double, now: Date = Date()) -> String? {
        now.timeIntervalSince1970 - issuedAt > maxAge ? "ExpiredProviderToken" : nil
    }
}
