import Crypto
import Foundation
import NIOConcurrencyHelpers

/// Token-based authentication for the HTTP/2 API: an ES256 JWT signed with the team's `.p8` key.
///
/// Header `{"alg":"ES256","kid":KEY_ID}`, claims `{"iss":TEAM_ID,"iat":SECONDS}`; base64url without padding.
public struct ProviderTokenSigner: Sendable {
    public let keyID: String
    public let teamID: String
    let key: P256.Signing.PrivateKey

    public init(keyID: String, teamID: String, key: P256.Signing.PrivateKey) {
        self.keyID = keyID
        self.teamID = teamID
        self.key = key
    }

    /// Reads the `.p8` file (PKCS#8 PEM of an EC P-256 key).
    public init(keyFile: String, keyID: String, teamID: String) throws(CertificateError) {
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
    public func token(issuedAt: Date) throws -> String {
        let header = Base64URL.encode(Array(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
        let claims = Base64URL.encode(Array(#"{"iss":"\#(teamID)","iat":\#(Int64(issuedAt.timeIntervalSince1970))}"#.utf8))
        let signingInput = header + "." + claims
        let signature = try key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }
}

/// The token a daemon presents: made once and reused, replaced after `refreshAfter` (Apple refuses tokens older
/// than an hour and answers 429 TooManyProviderTokenUpdates to tokens replaced more often than every 20 minutes).
public final class ProviderTokenCache: Sendable {
    public static let allowedRefresh: ClosedRange<TimeInterval> = 20 * 60...60 * 60

    private struct State {
        var token: String?
        var issuedAt = Date.distantPast
        /// Tokens made so far (for tests and logs).
        var generation = 0
        /// The token was already replaced after an ExpiredProviderToken: do not replace it again at once.
        var refreshedAfterExpiry = false
    }

    let signer: ProviderTokenSigner
    let refreshAfter: TimeInterval
    private let state = NIOLockedValueBox(State())

    public init(signer: ProviderTokenSigner, refreshAfter: TimeInterval = 50 * 60) {
        self.signer = signer
        self.refreshAfter = min(max(refreshAfter, Self.allowedRefresh.lowerBound), Self.allowedRefresh.upperBound)
    }

    /// The current token, made anew when it is `refreshAfter` old.
    public func current(now: Date = Date()) throws -> (token: String, generation: Int) {
        try state.withLockedValue { state in
            if let token = state.token, now.timeIntervalSince(state.issuedAt) < refreshAfter {
                return (token, state.generation)
            }
            return try Self.renew(&state, signer: signer, now: now)
        }
    }

    /// APNs called token `generation` expired: replace it once (true); false when it was replaced already
    /// because of an expiry and the new one is refused too (a clock or key problem: refreshing again would not help).
    public func expired(generation: Int, now: Date = Date()) throws -> Bool {
        try state.withLockedValue { state in
            guard generation == state.generation else { return true }  // already replaced
            if state.refreshedAfterExpiry { return false }
            _ = try Self.renew(&state, signer: signer, now: now)
            state.refreshedAfterExpiry = true
            return true
        }
    }

    /// A notification went through with token `generation`: a later expiry may refresh again.
    public func accepted(generation: Int) {
        state.withLockedValue { state in
            if generation == state.generation { state.refreshedAfterExpiry = false }
        }
    }

    public var generation: Int { state.withLockedValue { $0.generation } }

    private static func renew(_ state: inout State, signer: ProviderTokenSigner, now: Date) throws -> (token: String, generation: Int) {
        let token = try signer.token(issuedAt: now)
        state.token = token
        state.issuedAt = now
        state.generation += 1
        return (token, state.generation)
    }
}

/// Checks provider tokens as APNs does (the simulator's side).
public struct ProviderTokenVerifier: Sendable {
    public let keyID: String
    public let teamID: String
    let key: P256.Signing.PublicKey
    /// Tokens older than this are expired. Apple: one hour.
    public var maxAge: TimeInterval = 3600

    public init(keyID: String, teamID: String, publicKeyPEM: String) throws {
        self.keyID = keyID
        self.teamID = teamID
        self.key = try P256.Signing.PublicKey(pemRepresentation: publicKeyPEM)
    }

    /// nil when valid; else Apple's reason (`InvalidProviderToken`, `ExpiredProviderToken`).
    public func check(_ token: String, now: Date = Date()) -> String? {
        guard let issuedAt = issuedAt(of: token) else { return "InvalidProviderToken" }
        return check(issuedAt: issuedAt, now: now)
    }

    /// The token's `iat` when it is an ES256 JWT for this key and team with a good signature; else nil.
    public func issuedAt(of token: String) -> Double? {
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
    public func check(issuedAt: Double, now: Date = Date()) -> String? {
        now.timeIntervalSince1970 - issuedAt > maxAge ? "ExpiredProviderToken" : nil
    }
}

/// base64url without padding (RFC 7515).
public enum Base64URL {
    public static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    public static func decode(_ text: String) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).map(Array.init)
    }
}
