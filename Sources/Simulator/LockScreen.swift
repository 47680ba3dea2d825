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
    /// "PushChat" over the binary interface, which names no topic; an Android phone's is its Firebase project.
    package var app = "PushChat"
    /// An Android phone (the notification came through the simulator's FCM).
    package var android = false
    /// A browser (the notification came through the simulator's push service: Web Push).
    package var web = false

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
        if notification.format == "fcm" {
            readFCM(object)
            return
        }
        if notification.format == "web" {
            readWeb(object)
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

    /// An FCM request body as an Android phone shows it: the notification's title and body (a chat body "Ann: hi" as
    /// on the iPhone), the sound of `android.notification`, the data keys; data only is delivered to the app silently.
    private mutating func readFCM(_ request: [String: Any]) {
        android = true
        let message = request["message"] as? [String: Any] ?? [:]
        let notification = message["notification"] as? [String: Any] ?? [:]
        let androidNotification = (message["android"] as? [String: Any])?["notification"] as? [String: Any] ?? [:]
        title = notification["title"] as? String ?? androidNotification["title"] as? String
        let text = notification["body"] as? String ?? androidNotification["body"] as? String
        if title == nil, let text, let separator = text.range(of: ": ") {
            title = String(text[..<separator.lowerBound])
            body = String(text[separator.upperBound...])
        } else {
            body = text
        }
        sound = androidNotification["sound"] as? String
        customKeys = ((message["data"] as? [String: Any])?.keys).map { $0.sorted() } ?? []
        silent = title == nil && body == nil
    }

    /// A Declarative Web Push message as a browser shows it: the notification's title and body, its data's keys.
    private mutating func readWeb(_ message: [String: Any]) {
        web = true
        let notification = message["notification"] as? [String: Any] ?? [:]
        title = notification["title"] as? String
        body = notification["body"] as? String
        customKeys = ((notification["data"] as? [String: Any])?.keys).map { $0.sorted() } ?? []
        silent = title == nil && body == nil
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
