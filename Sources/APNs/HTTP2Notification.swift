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
        // Counted in bytes (constant time; counting characters walked the token twice per row, 2% of the daemon's
        // CPU): a token of anything but hex digits is refused by the check that follows anyway.
        let digits = token.utf8
        guard digits.count >= 16, digits.count % 2 == 0, digits.allSatisfy({ Hex.value($0) != nil }) else {
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
        path = Self.path(token: token)
        let rowTopic = notification.topic ?? pushType.topic(bundleID: topic)
        guard !rowTopic.isEmpty, rowTopic.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw UnsendableReason(description: "topic is not printable ASCII without spaces")
        }
        // A row written by a compromised or older API cannot borrow the credentials for another app of the team.
        if let own = notification.topic, !PushType.topic(own, belongsTo: topic) {
            throw UnsendableReason(description: "topic \(own) is not this app's (\(topic), or it with one of Apple's suffixes)")
        }
        var headers: [(String, String)] = [
            ("apns-topic", rowTopic),
            ("apns-push-type", pushType.rawValue),
            ("apns-priority", "\(priority)"),
            ("apns-expiration", "\(expiration)"),
            ("apns-id", Self.apnsIDText(messageID: notification.messageID)),
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
        func byte(_ shift: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: id >> shift) }
        // "PushCh", version 8, then the id; variant 10 in its top bits (message ids stay far below 2^62).
        return UUID(
            uuid: (
                0x50, 0x75, 0x73, 0x68, 0x43, 0x68, 0x80, 0x00,
                (byte(56) & 0x3F) | 0x80, byte(48), byte(40), byte(32), byte(24), byte(16), byte(8), byte(0)
            )
        )
    }

    /// ``apnsID(messageID:)`` as the header's lowercase text, written in one allocation (Foundation's `uuidString`
    /// and `lowercased()` made two strings per request).
    package static func apnsIDText(messageID: Int64) -> String {
        let id = UInt64(bitPattern: messageID)
        let variant = (id >> 48 & 0x3FFF) | 0x8000
        return String(unsafeUninitializedCapacity: 36) { text in
            var at = 0
            for byte in "50757368-4368-8000-".utf8 {
                text[at] = byte
                at += 1
            }
            func hex(_ value: UInt64, digits: Int) {
                for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
                    text[at] = Hex.lowercaseDigit(UInt8(truncatingIfNeeded: value >> UInt64(shift)) & 0xF)
                    at += 1
                }
            }
            hex(variant, digits: 4)
            text[at] = UInt8(ascii: "-")
            at += 1
            hex(id & 0xFFFF_FFFF_FFFF, digits: 12)
            return at
        }
    }

    /// `/3/device/` and the token in lowercase, in one allocation.
    static func path(token: String) -> String {
        let prefix = "/3/device/".utf8
        let count = prefix.count + token.utf8.count
        return String(unsafeUninitializedCapacity: count) { path in
            var at = 0
            for byte in prefix {
                path[at] = byte
                at += 1
            }
            for byte in token.utf8 {
                path[at] = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
                at += 1
            }
            return at
        }
    }
}
