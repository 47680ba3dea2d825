package import Foundation
import Settings
import Support

/// The HTTP/2 provider API's request for one queued row: path and headers (without `authorization`).
package struct HTTP2Notification: Sendable, Equatable {
    package let path: String
    package let headers: [(String, String)]
    package let apnsID: UUID

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.path == rhs.path && lhs.apnsID == rhs.apnsID && lhs.headers.map { "\($0.0)=\($0.1)" } == rhs.headers.map { "\($0.0)=\($0.1)" }
    }

    /// The request for `notification`; row values win over the daemon's defaults. Throws when the row can never be
    /// sent on this path.
    package init(
        _ notification: QueuedNotification,
        topic: String,
        defaultPriority: Int,
        defaultExpiry: UInt32,
        now: Date
    ) throws(UnsendableReason) {
        let token = notification.deviceToken
        guard token.count >= 16, token.count % 2 == 0, token.utf8.allSatisfy({ Hex.value($0) != nil }) else {
            throw UnsendableReason(description: "device token is not an even number of hex digits")
        }
        let name = notification.pushType ?? PushType.default.rawValue
        guard let pushType = PushType(rawValue: name) else { throw UnsendableReason(description: "unknown push type '\(name)'") }
        let limit = pushType.payloadLimit
        let size = notification.payload.utf8.count
        guard size > 0 else { throw UnsendableReason(description: "empty payload") }
        guard size <= limit else { throw UnsendableReason(description: "payload of \(size) bytes exceeds the limit of \(limit)") }
        let priority = notification.priority ?? defaultPriority
        guard PushPriority(rawValue: priority) != nil else { throw UnsendableReason(description: "priority \(priority) is not 10, 5 or 1") }
        let expiration = notification.expiry(defaultExpiry: defaultExpiry, now: now)
        apnsID = Self.apnsID(messageID: notification.messageID)
        path = "/3/device/" + token.lowercased()
        let rowTopic = notification.topic ?? pushType.topic(bundleID: topic)
        guard !rowTopic.isEmpty, rowTopic.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw UnsendableReason(description: "topic is not printable ASCII without spaces")
        }
        var headers: [(String, String)] = [
            ("apns-topic", rowTopic),
            ("apns-push-type", pushType.rawValue),
            ("apns-priority", "\(priority)"),
            ("apns-expiration", "\(expiration)"),
            ("apns-id", apnsID.uuidString.lowercased()),
        ]
        if let collapseID = notification.collapseID {
            guard collapseID.utf8.count <= 64 else { throw UnsendableReason(description: "collapse id longer than 64 bytes") }
            headers.append(("apns-collapse-id", collapseID))
        }
        self.headers = headers
    }

    /// The `apns-id` of a row: the same UUID on every attempt, so APNs and logs recognise a retry. Version 8
    /// (custom) UUID: "PushChat" in the first 6 bytes, the message id in the last 8.
    package static func apnsID(messageID: Int64) -> UUID {
        let id = UInt64(bitPattern: messageID)
        var bytes: [UInt8] = Array("PushCh".utf8) + [0x80, 0x00]
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: id >> UInt64(shift))) }
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // variant 10 (message ids stay far below 2^62)
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            )
        )
    }
}
