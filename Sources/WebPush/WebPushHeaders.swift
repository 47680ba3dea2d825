import Crypto
package import Foundation
import Support

/// The headers of a push request besides `Authorization` (RFC 8030 §5.2–5.4, RFC 8188).
package struct WebPushHeaders: Sendable, Equatable {
    /// `TTL`: how long the push service keeps the message for an offline browser; 0 = deliver now or drop.
    package let timeToLive: Int
    /// `Urgency`: `very-low`, `low`, `normal` or `high` (nil: not sent; push services take `normal`).
    package let urgency: String?
    /// `Topic`: an undelivered message with the same topic is replaced (≤ 32 base64url characters).
    package let topic: String?

    /// The longest TTL sent: four weeks, what push services keep at most.
    package static let maximumTimeToLive = 28 * 24 * 3600

    package init(timeToLive: Int, urgency: String?, topic: String?) {
        self.timeToLive = timeToLive
        self.urgency = urgency
        self.topic = topic
    }

    /// The headers for a notification with the queue's fields: `expiration` (nil: none, so TTL 0), `priority` (APNs'
    /// 10, 5, 1) and `collapse_id`.
    package init(expiration: Date?, priority: Int?, collapseID: String?, now: Date) {
        let ttl = expiration.map { Int(($0.timeIntervalSince(now)).rounded(.down)) } ?? 0
        self.init(
            timeToLive: min(max(ttl, 0), Self.maximumTimeToLive),
            urgency: priority.map(Self.urgency(priority:)),
            topic: collapseID.map(Self.topic(collapseID:))
        )
    }

    /// APNs' priorities as urgencies: 10 → high, 5 → normal, 1 (and anything lower) → low.
    package static func urgency(priority: Int) -> String {
        switch priority {
        case 10...: "high"
        case 5..<10: "normal"
        default: "low"
        }
    }

    /// A collapse id as a topic: itself when it is already base64url of at most 32 characters, else the base64url of
    /// the first 24 bytes of its SHA-256 (32 characters): the same id always gives the same topic.
    package static func topic(collapseID: String) -> String {
        let safe = collapseID.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"):
                true
            default: false
            }
        }
        if safe, !collapseID.isEmpty, collapseID.utf8.count <= 32 { return collapseID }
        return Base64URL.encode(Array(SHA256.hash(data: Array(collapseID.utf8)).prefix(24)))
    }

    /// The headers as name and value, with `Content-Encoding` and `Content-Type`.
    package var fields: [(String, String)] {
        var fields = [("ttl", String(timeToLive)), ("content-encoding", "aes128gcm"), ("content-type", "application/octet-stream")]
        if let urgency { fields.append(("urgency", urgency)) }
        if let topic { fields.append(("topic", topic)) }
        return fields
    }
}
