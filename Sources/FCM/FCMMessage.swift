import Foundation
package import Support

/// One FCM HTTP v1 `messages:send` request body: `{"message": {"token", "notification", "data", "android"}}`.
package struct FCMMessage: Sendable, Equatable {
    package var token: String
    /// The cross-platform notification (`title`, `body`).
    package var title: String?
    package var body: String?
    /// Data values are strings in FCM.
    package var data: [(key: String, value: String)] = []
    /// `android`: `priority` (`high`/`normal`), `ttl` (seconds), `collapse_key`, and its `notification` object as given.
    package var priority: String?
    package var ttlSeconds: Int?
    package var collapseKey: String?
    package var androidNotification: JSON?

    /// FCM's limit on the data payload.
    package static let maximumDataBytes = 4096
    /// FCM's limit on a whole message (notification, data and android options, as serialized without the token).
    package static let maximumMessageBytes = 4096
    /// FCM registration tokens are opaque: about 150 to 200 characters of base64url with ":" (older ones start "APA91b").
    package static let tokenLength = 100...4096

    package init(token: String) { self.token = token }

    package static func == (lhs: FCMMessage, rhs: FCMMessage) -> Bool { lhs.json == rhs.json }

    /// The data payload's size as FCM counts it (keys and values).
    package var dataBytes: Int { data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count } }

    /// Whether `text` has the shape of an FCM registration token (no whitespace, JSON-safe characters).
    package static func isToken(_ text: String) -> Bool {
        tokenLength.contains(text.utf8.count)
            && text.utf8.allSatisfy {
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
                    || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".")
            }
    }

    /// The request body.
    package var json: String {
        var members: [JSON.Member] = [JSON.Member("token", .string(token))]
        var notification: [JSON.Member] = []
        if let title { notification.append(JSON.Member("title", .string(title))) }
        if let body { notification.append(JSON.Member("body", .string(body))) }
        if !notification.isEmpty { members.append(JSON.Member("notification", .object(notification))) }
        if !data.isEmpty { members.append(JSON.Member("data", .object(data.map { JSON.Member($0.key, .string($0.value)) }))) }
        var android: [JSON.Member] = []
        if let priority { android.append(JSON.Member("priority", .string(priority))) }
        if let ttlSeconds { android.append(JSON.Member("ttl", .string("\(ttlSeconds)s"))) }
        if let collapseKey { android.append(JSON.Member("collapse_key", .string(collapseKey))) }
        if let androidNotification { android.append(JSON.Member("notification", androidNotification)) }
        if !android.isEmpty { members.append(JSON.Member("android", .object(android))) }
        var text = ""
        JSON.object([JSON.Member("message", .object(members))]).write(to: &text)
        return text
    }
}

extension FCMMessage {
    /// The request body for a queued row: its payload is the message object without the token (`{"notification":…,
    /// "data":…, "android":…}`), so the token goes in front; nil when the payload is no JSON object.
    package static func body(token: String, payload: String) -> String? {
        let trimmed = payload.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix("{"), trimmed.hasSuffix("}") else { return nil }
        let inner = trimmed.dropFirst().dropLast().trimmingCharacters(in: .whitespacesAndNewlines)
        let head = #"{"message":{"token":"# + JSONText.quoted(token)
        return inner.isEmpty ? head + "}}" : head + "," + inner + "}}"
    }
}
