import Crypto
package import Foundation
import Support

/// The `Authorization: vapid t=<JWT>, k=<public key>` of a push request (RFC 8292 §2–3): an ES256 JWT whose audience
/// is the push service's origin, expiring at most 24 hours ahead, with the operator's contact as subject.
package struct VAPIDToken: Sendable, Equatable {
    /// The push service's origin, `https://host[:port]`.
    package let audience: String
    /// Unix seconds.
    package let expires: Int64
    /// `mailto:` or `https:`: whom the push service contacts about this sender.
    package let subject: String

    /// The longest a token may live (RFC 8292 §2: no more than 24 hours from the request).
    package static let maximumLifetime: Int64 = 24 * 3600
    /// How long the tokens this server makes live: 12 hours, reused per origin until half of that is left.
    package static let lifetime: Int64 = 12 * 3600

    package init(audience: String, expires: Int64, subject: String) {
        self.audience = audience
        self.expires = expires
        self.subject = subject
    }

    /// A contact a push service accepts: `mailto:` with an address, or an `https:` URL.
    package static func checkSubject(_ subject: String) throws(WebPushError) {
        let lower = subject.lowercased()
        if lower.hasPrefix("mailto:"), subject.dropFirst(7).contains("@") { return }
        if lower.hasPrefix("https://"), let url = URL(string: subject), url.host?.isEmpty == false { return }
        throw WebPushError(code: .badVAPID, reason: "the VAPID subject is a mailto: address or an https: URL")
    }

    /// The JWS signing input: header `{"typ":"JWT","alg":"ES256"}` and the claims in RFC 8292's order.
    package var signingInput: String {
        let claims = #"{"aud":"# + JSONText.quoted(audience) + #","exp":\#(expires),"sub":"# + JSONText.quoted(subject) + "}"
        return Self.encodedHeader + "." + Base64URL.encode(Array(claims.utf8))
    }

    private static let encodedHeader = Base64URL.encode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8))

    /// The signed JWT (the signature r || s, 64 bytes, as JOSE has it).
    package func jwt(signedWith key: VAPIDKey) throws(WebPushError) -> String {
        let input = signingInput
        do {
            let signature = try key.privateKey.signature(for: Data(input.utf8))
            return input + "." + Base64URL.encode(Array(signature.rawRepresentation))
        } catch {
            throw WebPushError(code: .badVAPID, reason: "the VAPID key did not sign")
        }
    }

    /// The request's `Authorization` value.
    package func authorization(signedWith key: VAPIDKey) throws(WebPushError) -> String {
        "vapid t=\(try jwt(signedWith: key)), k=\(key.publicKey)"
    }

    /// What a push service does with an `Authorization` header (the simulator's check): the token, when its signature
    /// holds under the header's `k=` (and that key is `expectedKey`, when given: the key the subscription was made
    /// with), it names `audience` and has not expired at `now` nor expires more than 24 hours after it.
    package static func verify(
        authorization: String,
        audience: String,
        expectedKey: String? = nil,
        now: Date
    ) throws(WebPushError) -> VAPIDToken {
        func refuse(_ reason: String) -> WebPushError { WebPushError(code: .badVAPID, reason: reason) }
        guard authorization.hasPrefix("vapid ") else { throw refuse("not a vapid Authorization") }
        var token: String?
        var key: String?
        for part in authorization.dropFirst(6).split(separator: ",") {
            let item = part.trimmingCharacters(in: .whitespaces)
            if item.hasPrefix("t=") { token = String(item.dropFirst(2)) }
            if item.hasPrefix("k=") { key = String(item.dropFirst(2)) }
        }
        guard let token, let key else { throw refuse("the Authorization has no t= or no k=") }
        if let expectedKey, expectedKey != key { throw refuse("k= is not the key the subscription was made with") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let header = Base64URL.decode(parts[0]), let claims = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2]), let keyBytes = Base64URL.decode(key)
        else { throw refuse("the token is not a JWT in base64url") }
        guard let headerObject = try? JSONSerialization.jsonObject(with: Data(header)) as? [String: Any],
            headerObject["alg"] as? String == "ES256"
        else { throw refuse("the token is not ES256") }
        do {
            let publicKey = try P256.Signing.PublicKey(x963Representation: keyBytes)
            let ecdsa = try P256.Signing.ECDSASignature(rawRepresentation: signature)
            guard publicKey.isValidSignature(ecdsa, for: Data((parts[0] + "." + parts[1]).utf8)) else {
                throw refuse("the token's signature does not hold under k=")
            }
        } catch let error as WebPushError {
            throw error
        } catch {
            throw refuse("k= is not a P-256 public key, or the signature is not 64 bytes")
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(claims)) as? [String: Any],
            let aud = object["aud"] as? String, let exp = (object["exp"] as? NSNumber)?.int64Value
        else { throw refuse("the token's claims lack aud or exp") }
        let subject = object["sub"] as? String ?? ""
        guard aud == audience else { throw refuse("the token's audience is \(aud), not \(audience)") }
        let seconds = Int64(now.timeIntervalSince1970)
        guard exp > seconds else { throw refuse("the token expired") }
        guard exp <= seconds + maximumLifetime else { throw refuse("the token expires more than 24 hours ahead") }
        return VAPIDToken(audience: aud, expires: exp, subject: subject)
    }
}
