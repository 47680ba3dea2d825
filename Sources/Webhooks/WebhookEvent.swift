package import Foundation
package import Support

/// What a delivery event says happened.
package enum WebhookEventType: String, Sendable, CaseIterable, Comparable {
    /// A token accepted by Apple or Google.
    case sent = "notification.sent"
    /// A recipient failed for good: the status and reason Apple or Google gave, or the project's own (`expired`,
    /// `unencodable`, `canceled`).
    case failed = "notification.failed"
    /// Apple's 410 or Google's UNREGISTERED: the token the feedback job will prune.
    case unregistered = "device.unregistered"
    /// Every recipient of a notification has a final state: its counts, as the status API gives them.
    case completed = "notification.completed"
    /// Chat messages (no notification id; keyed by message id), only for a webhook that asks for them.
    case chat

    /// What a webhook gets when `--events` is not given: every type but `notification.sent` (one per device of every
    /// notification) and chat.
    package static let defaults: Set<Self> = [.failed, .unregistered, .completed]

    /// `notification.failed,device.unregistered`: refused with the known names when one is unknown or the list is empty.
    package static func parseList(_ text: String) throws -> Set<Self> {
        let names = text.split(separator: ",").map { String($0).trimmingWhitespace() }.filter { !$0.isEmpty }
        guard !names.isEmpty else {
            throw WebhookError(code: .badEvents, reason: "--events names at least one of \(known)")
        }
        return try Set(
            names.map { name in
                guard let type = Self(rawValue: name) else {
                    throw WebhookError(code: .badEvents, reason: "unknown event type \(JSONText.quoted(name)): one of \(known)")
                }
                return type
            }
        )
    }

    static var known: String { allCases.map(\.rawValue).joined(separator: ", ") }

    package static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One delivery event: `{"id", "type", "timestamp", "data"}`. The id is stable across retries (the receiver's key
/// against duplicates: delivery is at least once).
package struct WebhookEvent: Sendable, Equatable {
    package let id: String
    package let type: WebhookEventType
    package let timestamp: Date
    /// `notification_id`, `app`, `platform`, `token`, `status`, `reason`, … (completed: the counts instead of a token).
    package let data: [JSON.Member]

    package init(id: String, type: WebhookEventType, timestamp: Date, data: [JSON.Member]) {
        self.id = id
        self.type = type
        self.timestamp = timestamp
        self.data = data
    }

    package var json: JSON {
        .object([
            .init("id", .string(id)),
            .init("type", .string(type.rawValue)),
            .init("timestamp", .string(Self.rfc3339(timestamp))),
            .init("data", .object(data)),
        ])
    }

    /// A POST's body: `{"events": [ … ]}`, at most ``maxPerPost`` of them.
    package static func body(_ events: [WebhookEvent]) -> [UInt8] {
        precondition(events.count <= maxPerPost, "at most \(maxPerPost) events per POST")
        return Array(JSON.object([.init("events", .array(events.map(\.json)))]).serialized.utf8)
    }

    /// Events per POST: a broadcast to a million devices is a thousand POSTs, not a million.
    package static let maxPerPost = 1_000

    /// `2026-11-27T21:31:37.123Z` (RFC 3339, UTC, milliseconds).
    package static func rfc3339(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let seconds = milliseconds.quotient(dividingBy: 1000)
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let fraction = milliseconds - seconds * 1000
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
            Int(parts.tm_year) + 1900,
            Int(parts.tm_mon) + 1,
            Int(parts.tm_mday),
            Int(parts.tm_hour),
            Int(parts.tm_min),
            Int(parts.tm_sec),
            Int(fraction)
        )
    }
}

extension Int64 {
    /// Floor division (a date before 1970 still gets the right second).
    fileprivate func quotient(dividingBy divisor: Int64) -> Int64 {
        let (quotient, remainder) = quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? quotient - 1 : quotient
    }
}
