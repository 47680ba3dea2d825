package import Crypto
import Foundation
import Support

/// An application server's VAPID key (RFC 8292): a P-256 key pair. The private key signs the token each request
/// carries; the public key is the `applicationServerKey` a page subscribes with and the `k=` of every request, so a
/// push service delivers only requests signed by the key the subscription was made for. Its description never shows
/// the private key.
package struct VAPIDKey: Sendable, CustomStringConvertible {
    package let privateKey: P256.Signing.PrivateKey

    package init(privateKey: P256.Signing.PrivateKey) { self.privateKey = privateKey }

    /// A new key.
    package static func generate() -> Self { Self(privateKey: P256.Signing.PrivateKey()) }

    /// Reads a PEM key as `openssl ecparam -name prime256v1 -genkey -noout` writes it (`EC PRIVATE KEY`), or PKCS #8
    /// (`PRIVATE KEY`); anything else, or another curve, is refused without echoing the file.
    package init(pem: String) throws(WebPushError) {
        do {
            privateKey = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw WebPushError(
                code: .badVAPID,
                reason: "not a P-256 private key in PEM (openssl ecparam -name prime256v1 -genkey -noout writes one)"
            )
        }
    }

    /// Reads the key file `path`.
    package init(file path: String) throws(WebPushError) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw WebPushError(code: .badVAPID, reason: "cannot read the VAPID key file \(path)")
        }
        try self.init(pem: text)
    }

    /// The key as `webpush generate-key` writes it: PKCS #8 PEM (`PRIVATE KEY`), which openssl reads too.
    package var pem: String { privateKey.pemRepresentation }

    /// The public key as base64url of the uncompressed point: the page's `applicationServerKey` and `k=`.
    package var publicKey: String { Base64URL.encode(Array(privateKey.publicKey.x963Representation)) }

    package var description: String { "VAPID key \(publicKey)" }
}
