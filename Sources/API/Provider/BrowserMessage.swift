import Support
import WebPush

/// What `POST /v1/notifications` sends to browsers: the Declarative Web Push JSON (``WebPushMessage``) from the
/// request's cross-platform `notification` (or `aps.alert`), its `data`, `web.navigate` (where a click goes; `/` by
/// default, the subscribing site's root) and `collapse_id` as the lock screen's tag. Encrypted for each browser when
/// sent: its JSON may hold at most ``ContentEncryption/maximumPlaintext`` bytes (4,096 encrypted).
package struct BrowserMessage: Sendable, Equatable {
    /// The JSON the queue stores; nil when the request cannot go to a browser (``refusal`` says why; refused only if
    /// the recipients include one).
    package let payload: String?
    /// Why the request cannot reach a browser, with the field.
    package let refusal: (field: String, reason: String)?

    package static func == (lhs: BrowserMessage, rhs: BrowserMessage) -> Bool {
        lhs.payload == rhs.payload && lhs.refusal?.field == rhs.refusal?.field && lhs.refusal?.reason == rhs.refusal?.reason
    }

    /// Where a click takes the user when `web.navigate` does not say: the site's root.
    static let defaultNavigate = "/"

    /// Checks `web` (an object with `navigate`: an https URL or a path from the site's root); returns `navigate`.
    static func checkWeb(_ value: JSON?) throws(ProviderError) -> String? {
        guard let value else { return nil }
        guard let members = value.members else { throw .invalid("web", "web must be an object: {\"navigate\": URL}") }
        for member in members where member.key != "navigate" {
            throw .invalid("web.\(member.key)", "unknown web key \(JSONText.quoted(member.key)): navigate")
        }
        guard let navigate = value["navigate"] else { return nil }
        guard let text = navigate.stringValue, text.utf8.count <= 1024, text.hasPrefix("https://") || text.hasPrefix("/"),
            !ProviderJSON.hasControlCharacters(text)
        else {
            throw .invalid("web.navigate", "web.navigate is an https URL or a path from the site's root (\"/chat\"), at most 1,024 bytes")
        }
        return text
    }

    /// The message for the request's parts (each already checked).
    init(notification: [JSON.Member]?, aps: JSON?, data: JSON?, navigate: String?, collapseID: String?) {
        var title: String?
        var body: String?
        if let notification {
            title = notification.first { $0.key == "title" }?.value.stringValue
            body = notification.first { $0.key == "body" }?.value.stringValue
        } else if let alert = aps?["alert"] {
            if let text = alert.stringValue {
                body = text
            } else {
                title = alert["title"]?.stringValue
                body = alert["body"]?.stringValue
            }
        }
        // The format needs a title: a notification with only a body shows it as the title.
        guard let shown = title ?? body, !shown.isEmpty else {
            self.payload = nil
            self.refusal = ("notification", "nothing for a browser to show: give notification.title or body (or aps.alert)")
            return
        }
        let message = WebPushMessage(
            title: shown,
            body: title == nil ? nil : body,
            navigate: navigate ?? Self.defaultNavigate,
            tag: collapseID,
            data: data?.members ?? []
        )
        let payload = message.json
        guard payload.utf8.count <= ContentEncryption.maximumPlaintext else {
            self.payload = nil
            self.refusal = (
                data?.members?.isEmpty == false ? "data" : "notification",
                "the Web Push message is \(payload.utf8.count) bytes; encrypted for a browser it may hold \(ContentEncryption.maximumPlaintext) (4,096 bytes on the wire)"
            )
            return
        }
        self.payload = payload
        self.refusal = nil
    }
}
