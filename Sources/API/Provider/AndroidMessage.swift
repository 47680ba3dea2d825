import FCM
package import Foundation
import Support

/// What `POST /v1/notifications` sends to Android devices: FCM's message without its token, from the request's
/// cross-platform `notification` (or `aps.alert`), its `data` (string values) and its `android` options (with the
/// request's `priority`, `expiration` and `collapse_id` where `android` does not say).
package struct AndroidMessage: Sendable, Equatable {
    /// The FCM message object without the token, as the queue stores it; nil when the request cannot go to an
    /// Android device (``refusal`` says why; refused only if the recipients include one).
    package let payload: String?
    /// Why the request cannot reach an Android device, with the field.
    package let refusal: (field: String, reason: String)?

    package static func == (lhs: AndroidMessage, rhs: AndroidMessage) -> Bool {
        lhs.payload == rhs.payload && lhs.refusal?.field == rhs.refusal?.field && lhs.refusal?.reason == rhs.refusal?.reason
    }

    static let notificationKeys: Set<String> = ["title", "body", "image"]
    static let androidKeys: Set<String> = ["priority", "ttl", "collapse_key", "notification"]

    /// Checks `notification` (`title`, `body`, `image`: strings) and `android` (an object of FCM's AndroidConfig
    /// fields this server passes on): a malformed one is refused whoever the recipients are.
    static func checkNotification(_ value: JSON?) throws(ProviderError) -> [JSON.Member]? {
        guard let value else { return nil }
        guard let members = value.members, !members.isEmpty else {
            throw .invalid("notification", "notification must be an object with title, body or image")
        }
        for member in members {
            guard notificationKeys.contains(member.key) else {
                throw .invalid(
                    "notification.\(member.key)",
                    "unknown notification key \(JSONText.quoted(member.key)): title, body or image"
                )
            }
            guard let text = member.value.stringValue, text.utf8.count <= 4096 else {
                throw .invalid("notification.\(member.key)", "notification.\(member.key) must be a string")
            }
        }
        return members
    }

    static func checkAndroid(_ value: JSON?) throws(ProviderError) -> [JSON.Member]? {
        guard let value else { return nil }
        guard let members = value.members else { throw .invalid("android", "android must be an object") }
        for member in members {
            let field = "android.\(member.key)"
            switch member.key {
            case "priority":
                guard ["high", "normal"].contains(member.value.stringValue ?? "") else {
                    throw .invalid(field, "\(field) must be high or normal")
                }
            case "ttl":
                guard let text = member.value.stringValue, Self.seconds(ttl: text) != nil else {
                    throw .invalid(field, "\(field) must be seconds with an s, at most 28 days (\"3600s\")")
                }
            case "collapse_key":
                guard let text = member.value.stringValue, !text.isEmpty, text.utf8.count <= 64 else {
                    throw .invalid(field, "\(field) must be a string of 1 to 64 bytes")
                }
            case "notification":
                guard member.value.members != nil else { throw .invalid(field, "\(field) must be an object (FCM's AndroidNotification)") }
            default:
                throw .invalid(field, "unknown android key \(JSONText.quoted(member.key)): \(androidKeys.sorted().joined(separator: ", "))")
            }
        }
        return members
    }

    /// `"3600s"` as seconds, up to FCM's 28 days.
    static func seconds(ttl: String) -> Int? {
        guard ttl.hasSuffix("s"), let value = Int(ttl.dropLast()), value >= 0, value <= 28 * 86_400 else { return nil }
        return value
    }

    /// The message for the request's parts (each already checked).
    init(
        notification: [JSON.Member]?,
        aps: JSON?,
        data: JSON?,
        android: [JSON.Member]?,
        priority: Int?,
        expiration: Int64?,
        collapseID: String?,
        now: Date
    ) {
        var message: [JSON.Member] = []
        if let notification {
            message.append(JSON.Member("notification", .object(notification)))
        } else if let alert = aps?["alert"] {
            // The iPhone's alert, for the Android device: its text, or its title and body.
            var fields: [JSON.Member] = []
            if let text = alert.stringValue {
                fields.append(JSON.Member("body", .string(text)))
            } else {
                for key in ["title", "body"] { if let text = alert[key]?.stringValue { fields.append(JSON.Member(key, .string(text))) } }
            }
            if !fields.isEmpty { message.append(JSON.Member("notification", .object(fields))) }
        }
        if let data, let members = data.members, !members.isEmpty {
            if let bad = members.first(where: { $0.value.stringValue == nil }) {
                self.payload = nil
                self.refusal = (
                    "data.\(bad.key)", "data.\(bad.key) is not a string: FCM takes only string values in data (Android devices)"
                )
                return
            }
            let size = members.reduce(0) { $0 + $1.key.utf8.count + ($1.value.stringValue?.utf8.count ?? 0) }
            guard size <= FCMMessage.maximumDataBytes else {
                self.payload = nil
                self.refusal = ("data", "data is \(size) bytes; FCM allows \(FCMMessage.maximumDataBytes) (Android devices)")
                return
            }
            message.append(JSON.Member("data", .object(members)))
        }
        guard !message.isEmpty else {
            self.payload = nil
            self.refusal = ("notification", "nothing for an Android device: give notification, aps.alert or data")
            return
        }
        var options = android ?? []
        func add(_ key: String, _ value: JSON?) {
            if let value, !options.contains(where: { $0.key == key }) { options.append(JSON.Member(key, value)) }
        }
        add("priority", priority.map { .string($0 == 10 ? "high" : "normal") })
        add("ttl", expiration.map { .string("\($0 == 0 ? 0 : max(0, min(28 * 86_400, $0 - Int64(now.timeIntervalSince1970))))s") })
        add("collapse_key", collapseID.map { .string($0) })
        if !options.isEmpty { message.append(JSON.Member("android", .object(options))) }
        // FCM's limit is on the whole message: unchecked, android.notification (copied into every recipient's row)
        // could make one request write a gigabyte.
        let payload = JSON.object(message).serialized
        guard payload.utf8.count <= FCMMessage.maximumMessageBytes else {
            self.payload = nil
            self.refusal = (
                android?.contains(where: { $0.key == "notification" }) == true ? "android.notification" : "notification",
                "the FCM message is \(payload.utf8.count) bytes; FCM allows \(FCMMessage.maximumMessageBytes) (Android devices)"
            )
            return
        }
        self.payload = payload
        self.refusal = nil
    }
}
