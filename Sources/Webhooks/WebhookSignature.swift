import Crypto
package import Foundation

/// The Standard Webhooks signature: `v1,<base64 of HMAC-SHA256(secret, "<webhook-id>.<webhook-timestamp>.<body>")>`,
/// one per secret in use, space-separated (during a rotation, the new secret's and the old one's).
package enum WebhookSignature {
    /// The `webhook-signature` header for a POST of `body` with `id` and `timestamp` (Unix seconds).
    package static func header(id: String, timestamp: Int64, body: [UInt8], secrets: [WebhookSecret]) -> String {
        secrets.map { "v1," + signature(id: id, timestamp: timestamp, body: body, secret: $0) }.joined(separator: " ")
    }

    /// The base64 HMAC of one secret.
    package static func signature(id: String, timestamp: Int64, body: [UInt8], secret: WebhookSecret) -> String {
        let mac = HMAC<SHA256>.authenticationCode(
            for: Array("\(id).\(timestamp).".utf8) + body,
            using: SymmetricKey(data: secret.bytes)
        )
        return Data(mac).base64EncodedString()
    }

    /// What a receiver does: whether one of `header`'s `v1` signatures is `secret`'s for this POST (compared in
    /// constant time), and the timestamp within `tolerance` of `now` (Standard Webhooks: about five minutes, against
    /// replays).
    package static func verify(
        header: String,
        id: String,
        timestamp: Int64,
        body: [UInt8],
        secret: WebhookSecret,
        now: Date = Date(),
        tolerance: TimeInterval = 300
    ) -> Bool {
        guard abs(now.timeIntervalSince1970 - Double(timestamp)) <= tolerance else { return false }
        let signed = Array("\(id).\(timestamp).".utf8) + body
        let key = SymmetricKey(data: secret.bytes)
        return header.split(separator: " ").contains { entry in
            let parts = entry.split(separator: ",", maxSplits: 1)
            guard parts.count == 2, parts[0] == "v1", let given = Data(base64Encoded: String(parts[1])) else { return false }
            return HMAC<SHA256>.isValidAuthenticationCode(given, authenticating: signed, using: key)
        }
    }
}
