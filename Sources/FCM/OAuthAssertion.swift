package import Foundation
import Support
package import _CryptoExtras

/// The OAuth 2.0 JWT bearer assertion (RFC 7523) a service account trades for an access token: header
/// `{"alg":"RS256","typ":"JWT","kid":…}`, claims `{"iss":client_email,"scope":…,"aud":token_uri,"iat":…,"exp":…}`,
/// signed with the account's RSA key (PKCS #1 v1.5, SHA-256), posted to the token URI as
/// `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=…`.
package enum OAuthAssertion {
    /// The scope FCM's HTTP v1 API takes.
    package static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    package static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// How long an assertion is good for: Google takes at most one hour.
    package static let lifetime: TimeInterval = 3600

    /// The signed assertion for `account`, issued at `now`.
    package static func make(for account: ServiceAccount, now: Date) throws -> String {
        let issued = Int64(now.timeIntervalSince1970)
        var header = #"{"alg":"RS256","typ":"JWT""#
        if let kid = account.privateKeyID { header += #","kid":"# + JSONText.quoted(kid) }
        header += "}"
        let claims =
            #"{"iss":"# + JSONText.quoted(account.clientEmail) + #","scope":"# + JSONText.quoted(scope) + #","aud":"#
            + JSONText.quoted(account.tokenURI.absoluteString) + #","iat":\#(issued),"exp":\#(issued + Int64(lifetime))}"#
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        return signingInput + "." + (try sign(signingInput, with: account.privateKey))
    }

    /// The RS256 signature of a JWS signing input (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 §3.3), base64url.
    package static func sign(_ signingInput: String, with key: _RSA.Signing.PrivateKey) throws -> String {
        let signature = try key.signature(for: Data(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return Base64URL.encode(Array(signature.rawRepresentation))
    }

    /// The token request's form body.
    package static func requestBody(assertion: String) -> String {
        "grant_type=" + grantType.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! + "&assertion=" + assertion
    }

    /// What a verifier (the simulator's token endpoint) found wrong with an assertion; nil when it is good.
    package struct Claims: Sendable, Equatable {
        package let issuer: String
        package let scope: String
        package let audience: String
        package let issuedAt: Int64
        package let expires: Int64
    }

    /// Checks an assertion as Google's token endpoint does: RS256 signature by `key`, the scope, the audience
    /// (`tokenURI`), and the times (issued no later than `now` plus a minute of skew, expiring after `now`, at most an
    /// hour after issue). Returns its claims, or the reason it is refused.
    package static func verify(
        _ assertion: String,
        key: _RSA.Signing.PublicKey,
        tokenURI: String,
        now: Date
    ) -> Result<Claims, VerificationFailure> {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(parts[0])),
            let claimBytes = Base64URL.decode(String(parts[1])), let signature = Base64URL.decode(String(parts[2])),
            let header = try? JSON.parse(headerBytes), let claims = try? JSON.parse(claimBytes)
        else { return .failure(VerificationFailure("malformed assertion")) }
        guard header["alg"]?.stringValue == "RS256" else { return .failure(VerificationFailure("alg is not RS256")) }
        let signingInput = Data((parts[0] + "." + parts[1]).utf8)
        guard key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: signingInput, padding: .insecurePKCS1v1_5)
        else { return .failure(VerificationFailure("invalid signature")) }
        guard let issuer = claims["iss"]?.stringValue, let scope = claims["scope"]?.stringValue,
            let audience = claims["aud"]?.stringValue, let issuedAt = claims["iat"]?.integerValue,
            let expires = claims["exp"]?.integerValue
        else { return .failure(VerificationFailure("missing claims")) }
        guard scope.split(separator: " ").contains(Substring(Self.scope)) else {
            return .failure(VerificationFailure("scope does not include firebase.messaging"))
        }
        guard audience == tokenURI else { return .failure(VerificationFailure("aud is not the token URI")) }
        let seconds = Int64(now.timeIntervalSince1970)
        guard issuedAt <= seconds + 60, expires > seconds, expires > issuedAt, expires - issuedAt <= Int64(lifetime) else {
            return .failure(VerificationFailure("invalid iat/exp"))
        }
        return .success(Claims(issuer: issuer, scope: scope, audience: audience, issuedAt: issuedAt, expires: expires))
    }

    /// Why an assertion was refused (Google answers 400 `invalid_grant` with such a description).
    package struct VerificationFailure: Error, Equatable, Sendable {
        package let reason: String
        init(_ reason: String) { self.reason = reason }
    }
}
