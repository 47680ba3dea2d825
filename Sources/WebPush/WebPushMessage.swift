package import Support

/// A notification for a browser in the **Declarative Web Push** JSON (WebKit; RFC 8030's number as its marker):
/// `{"web_push": 8030, "notification": {"title", "body", "navigate", "tag"?, "data"?}}`. Safari (18.4+) shows it
/// without a service worker; elsewhere the page's service worker parses the same JSON and shows it.
package struct WebPushMessage: Sendable, Equatable {
    /// Required by the format: a notification without one shows the app's name.
    package var title: String
    package var body: String?
    /// Where a click takes the user (an absolute URL; required by the format).
    package var navigate: String
    /// A tag replaces an earlier notification with the same tag on the lock screen (the collapse id).
    package var tag: String?
    /// The notification's data, given to the page's service worker (FCM's `data`, APNs' custom keys).
    package var data: [JSON.Member]

    package init(title: String, body: String?, navigate: String, tag: String? = nil, data: [JSON.Member] = []) {
        self.title = title
        self.body = body
        self.navigate = navigate
        self.tag = tag
        self.data = data
    }

    /// The JSON, members in a fixed order.
    package var json: String {
        var notification = [JSON.Member("title", .string(title))]
        if let body { notification.append(JSON.Member("body", .string(body))) }
        notification.append(JSON.Member("navigate", .string(navigate)))
        if let tag { notification.append(JSON.Member("tag", .string(tag))) }
        if !data.isEmpty { notification.append(JSON.Member("data", .object(data))) }
        var text = ""
        JSON.object([JSON.Member("web_push", .number("8030")), JSON.Member("notification", .object(notification))]).write(to: &text)
        return text
    }

    /// Reads the JSON back (the simulator's browsers): nil when it is not a declarative message with a title.
    package init?(json bytes: [UInt8]) {
        guard let root = try? JSON.parse(bytes), root["web_push"]?.integerValue == 8030, let notification = root["notification"],
            let title = notification["title"]?.stringValue
        else { return nil }
        self.init(
            title: title,
            body: notification["body"]?.stringValue,
            navigate: notification["navigate"]?.stringValue ?? "",
            tag: notification["tag"]?.stringValue,
            data: notification["data"]?.members ?? []
        )
    }
}
