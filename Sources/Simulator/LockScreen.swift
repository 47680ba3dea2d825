package import Foundation

/// What a phone's lock screen would show for one accepted notification: read from the payload as iOS reads it.
package struct LockScreenItem: Sendable, Equatable {
    /// Who it is from: the part before ": " of a chat alert (`"Ann: hello"`), or the alert dictionary's title.
    package var title: String?
    package var subtitle: String?
    /// The text: the rest of a chat alert, the alert string, or the dictionary's body (or its `loc-key`).
    package var body: String?
    package var badge: Int?
    /// The sound's name (`default`), from a string or a dictionary's `name`.
    package var sound: String?
    /// `content-available` without an alert, badge or sound: delivered to the app, nothing shown to the person.
    package var silent = false
    package var arrival: Date
    /// Keys beside `aps` (the app's own data), sorted.
    package var customKeys: [String] = []
    /// Which app it is for: the `apns-topic` (HTTP/2; with several apps on one server each has its own), or
    /// "PushChat" over the binary interface, which names no topic.
    package var app = "PushChat"

    /// Reads `notification`'s payload; a payload that is not a JSON object shows as its raw text.
    package init(_ notification: AcceptedNotification) {
        arrival = notification.arrival
        if let topic = notification.topic, !topic.isEmpty { app = topic }
        guard let data = notification.payload.data(using: .utf8),
            let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        else {
            body = notification.payload
            return
        }
        customKeys = object.keys.filter { $0 != "aps" }.sorted()
        let aps = object["aps"] as? [String: Any] ?? [:]
        switch aps["alert"] {
        case let text as String:
            if let separator = text.range(of: ": ") {
                title = String(text[..<separator.lowerBound])
                body = String(text[separator.upperBound...])
            } else {
                body = text
            }
        case let alert as [String: Any]:
            title = alert["title"] as? String ?? alert["title-loc-key"] as? String
            subtitle = alert["subtitle"] as? String ?? alert["subtitle-loc-key"] as? String
            body = alert["body"] as? String ?? alert["loc-key"] as? String
        default:
            break
        }
        badge = (aps["badge"] as? NSNumber)?.intValue
        switch aps["sound"] {
        case let name as String: sound = name
        case let sound as [String: Any]: self.sound = sound["name"] as? String
        default: break
        }
        let contentAvailable = (aps["content-available"] as? NSNumber)?.intValue == 1
        silent = contentAvailable && aps["alert"] == nil && badge == nil && sound == nil
    }
}

/// The notifications of one device token, newest first.
package struct LockScreen: Sendable, Equatable {
    package var token: String
    package var items: [LockScreenItem]

    /// One screen per token, the most recently notified first; at most `perDevice` notifications each.
    package static func screens(_ notifications: [AcceptedNotification], perDevice: Int = 8) -> [LockScreen] {
        var order: [String] = []
        var byToken: [String: [AcceptedNotification]] = [:]
        for notification in notifications.sorted(by: { $0.arrival > $1.arrival }) {
            if byToken[notification.token] == nil { order.append(notification.token) }
            byToken[notification.token, default: []].append(notification)
        }
        return order.map { token in
            LockScreen(token: token, items: byToken[token, default: []].prefix(perDevice).map(LockScreenItem.init))
        }
    }
}
