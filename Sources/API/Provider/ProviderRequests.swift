package import APNs
import FCM
package import Foundation
import HTTPTypes
package import Settings
package import Storage
import Support
package import WebPush

/// `POST /v1/notifications`, checked: who gets it, the payload and the HTTP/2 options.
package struct NotificationRequest: Sendable, Equatable {
    /// The furthest expiration accepted: 30 days (APNs stores a notification no longer, and a row waiting that long
    /// is a mistake more often than an intent).
    static let maxExpiration: Double = 30 * 86_400
    /// Who gets it: tokens, registered users' devices, chat users (by udid or room), or everyone.
    package typealias Target = ProviderStore.Target

    /// Most entries one `to` list may hold.
    package static let maximumListCount = 10_000

    package let target: Target
    package let payload: NotificationPayload
    package let pushType: PushType
    /// nil: the daemon's default (5 for a background push).
    package let priority: PushPriority?
    /// Unix seconds; 0: deliver once (do not store); nil: the daemon's `apns_expiry`.
    package let expiration: Int64?
    package let collapseID: String?
    package let topic: String?
    package let onlyIfBadgeChanged: Bool
    /// What Android devices among the recipients get.
    package let android: AndroidMessage
    /// What browsers among the recipients get.
    package let web: BrowserMessage

    static let keys: Set<String> = [
        "to", "aps", "data", "push_type", "priority", "expiration", "collapse_id", "topic", "only_if_badge_changed", "notification",
        "android", "web",
    ]

    /// Checks a request body; `transport` decides the payload limit (the daemon's interface), `now` what an
    /// expiration in the past is.
    package init(body: [UInt8], transport: APNsTransport, now: Date = Date()) throws(ProviderError) {
        let json = try ProviderJSON.object(body)
        guard let members = json.members else { throw .invalid(nil, "the body must be a JSON object") }
        for member in members where !Self.keys.contains(member.key) {
            throw .invalid(member.key, "unknown field \(JSONText.quoted(member.key))")
        }
        guard let to = json["to"] else { throw .invalid("to", "to is required: tokens, users, udids, room or all") }
        target = try Self.target(to)
        let notification = try AndroidMessage.checkNotification(json["notification"])
        let androidOptions = try AndroidMessage.checkAndroid(json["android"])
        let navigate = try BrowserMessage.checkWeb(json["web"])
        // The cross-platform notification is the iPhone's alert too, unless aps gives one.
        var aps = json["aps"] ?? (notification == nil ? nil : .object([]))
        if let notification, var members = aps?.members, !members.contains(where: { $0.key == "alert" }) {
            members.insert(JSON.Member("alert", .object(notification.filter { $0.key != "image" })), at: 0)
            aps = .object(members)
        }
        guard let aps else { throw .invalid("aps", "aps is required (or notification, for every platform)") }
        do {
            payload = try NotificationPayload(aps: aps, data: json["data"])
        } catch {
            throw .invalid(error.field, error.reason)
        }
        if let value = json["push_type"] {
            guard let type = value.stringValue.flatMap(PushType.init(rawValue:)) else {
                throw .invalid("push_type", "push_type must be one of \(PushType.names)")
            }
            pushType = type
        } else {
            pushType = payload.isSilent ? .background : .default
        }
        if let value = json["priority"] {
            guard let number = value.integerValue, let given = PushPriority(rawValue: Int(number)) else {
                throw .invalid("priority", "priority must be 10, 5 or 1")
            }
            guard given != .immediate || pushType.allowsImmediatePriority else {
                throw .invalid("priority", "a background push must have priority 5 or 1 (Apple refuses 10)")
            }
            priority = given
        } else {
            priority = pushType.allowsImmediatePriority ? nil : .considerate
        }
        if let value = json["expiration"] {
            guard let seconds = value.integerValue, seconds >= 0, seconds <= 253_402_300_799 else {
                throw .invalid("expiration", "expiration must be Unix seconds (0: deliver once, do not store)")
            }
            guard seconds == 0 || Double(seconds) >= now.timeIntervalSince1970 else {
                throw .invalid("expiration", "expiration is in the past")
            }
            guard Double(seconds) <= now.timeIntervalSince1970 + Self.maxExpiration else {
                throw .invalid("expiration", "expiration is more than 30 days ahead (APNs keeps a notification at most that long)")
            }
            expiration = seconds
        } else {
            expiration = nil
        }
        collapseID = try Self.text(json["collapse_id"], "collapse_id", maximumBytes: 64)
        topic = try Self.text(json["topic"], "topic", maximumBytes: 255, headerSafe: true)
        if let value = json["only_if_badge_changed"] {
            guard let flag = value.boolValue else { throw .invalid("only_if_badge_changed", "only_if_badge_changed must be true or false") }
            guard !flag || payload.badge != nil else {
                throw .invalid("only_if_badge_changed", "only_if_badge_changed needs aps.badge")
            }
            onlyIfBadgeChanged = flag
        } else {
            onlyIfBadgeChanged = false
        }
        android = AndroidMessage(
            notification: notification,
            aps: aps,
            data: json["data"],
            android: androidOptions,
            priority: priority?.rawValue,
            expiration: expiration,
            collapseID: collapseID,
            now: now
        )
        web = BrowserMessage(notification: notification, aps: aps, data: json["data"], navigate: navigate, collapseID: collapseID)
        let limit = NotificationPayload.maximumBytes(transport: transport, pushType: pushType)
        let size = payload.json.utf8.count
        guard size <= limit else {
            throw ProviderError(
                .tooLarge,
                .contentTooLarge,
                "the payload is \(size) bytes; the \(transport == .binary ? "binary interface" : "HTTP/2 API") allows \(limit) for \(pushType)",
                field: "aps"
            )
        }
    }

    static func target(_ to: JSON) throws(ProviderError) -> Target {
        guard let members = to.members else { throw .invalid("to", "to must be an object: tokens, users, udids, room or all") }
        guard members.count == 1, let member = members.first else {
            throw .invalid("to", "to must name exactly one of tokens, users, udids, room or all")
        }
        let field = "to.\(member.key)"
        switch member.key {
        case "tokens":
            return .tokens(try list(member.value, field) { value, field throws(ProviderError) in try ProviderJSON.token(value, field) })
        case "users":
            return .users(try list(member.value, field) { value, field throws(ProviderError) in try ProviderJSON.user(value, field) })
        case "udids":
            return .udids(try list(member.value, field) { value, field throws(ProviderError) in try udid(value, field) })
        case "room":
            guard let room = member.value.stringValue, !room.isEmpty, room.utf8.count <= 255, !ProviderJSON.hasControlCharacters(room)
            else {
                throw .invalid(field, "room must be a room's secret code (1 to 255 bytes, no control characters)")
            }
            return .room(room)
        case "all":
            guard member.value.boolValue == true else { throw .invalid(field, "all must be true") }
            return .all
        default:
            throw .invalid(field, "to must name one of tokens, users, udids, room or all, not \(JSONText.quoted(member.key))")
        }
    }

    /// A non-empty array of at most ``maximumListCount`` entries, each checked, duplicates dropped (first kept).
    static func list(
        _ value: JSON,
        _ field: String,
        _ check: (JSON, String) throws(ProviderError) -> String
    ) throws(ProviderError) -> [String] {
        guard let elements = value.elements, !elements.isEmpty else { throw .invalid(field, "\(field) must be a non-empty array") }
        guard elements.count <= maximumListCount else {
            throw ProviderError(.tooLarge, .contentTooLarge, "\(field) holds more than \(maximumListCount) entries", field: field)
        }
        var seen = Set<String>()
        var result: [String] = []
        for (index, element) in elements.enumerated() {
            let entry = try check(element, "\(field)[\(index)]")
            if seen.insert(entry).inserted { result.append(entry) }
        }
        return result
    }

    /// A device id as the chat app sends it (40 or 32 hex digits, or a UUID with dashes), lower-case without dashes.
    static func udid(_ value: JSON, _ field: String) throws(ProviderError) -> String {
        guard let text = value.stringValue else { throw .invalid(field, "a udid must be a string") }
        var hex = text
        if hex.utf8.count == 36 { hex.removeAll { $0 == "-" } }
        guard hex.utf8.count == 40 || hex.utf8.count == 32, hex.utf8.allSatisfy({ Hex.value($0) != nil }) else {
            throw .invalid(field, "a udid is 40 or 32 hex digits (or a UUID)")
        }
        return hex.lowercased()
    }

    static func text(_ value: JSON?, _ field: String, maximumBytes: Int, headerSafe: Bool = false) throws(ProviderError) -> String? {
        guard let value else { return nil }
        guard let text = value.stringValue, !text.isEmpty, text.utf8.count <= maximumBytes else {
            throw .invalid(field, "\(field) must be a string of 1 to \(maximumBytes) bytes")
        }
        if headerSafe {
            guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw .invalid(field, "\(field) must be printable ASCII without spaces (a bundle id)")
            }
        } else {
            guard !ProviderJSON.hasControlCharacters(text) else { throw .invalid(field, "\(field) must not hold control characters") }
        }
        return text
    }
}

/// `POST /v1/devices`: a token, optionally tied to a user, with the app's client-info string.
package struct DeviceRegistration: Sendable, Equatable {
    package let token: String
    package let user: String?
    package let clientInfo: String?
    /// `apns` (the default), `fcm` or `web`.
    package let platform: Platform
    /// A browser's subscription (`platform` web; its token is derived from the endpoint). Its endpoint's addresses
    /// are not checked here (that resolves the host): the controller does before anything is written.
    package let subscription: WebPushSubscription?

    package init(token: String, user: String?, clientInfo: String?, platform: Platform = .apns, subscription: WebPushSubscription? = nil) {
        self.token = token
        self.user = user
        self.clientInfo = clientInfo
        self.platform = platform
        self.subscription = subscription
    }

    package init(body: [UInt8]) throws(ProviderError) {
        let json = try ProviderJSON.object(body)
        guard let members = json.members else { throw .invalid(nil, "the body must be a JSON object") }
        for member in members where !["token", "user", "client_info", "platform", "subscription"].contains(member.key) {
            throw .invalid(member.key, "unknown field \(JSONText.quoted(member.key))")
        }
        let platform = try json["platform"].map { value throws(ProviderError) in
            guard let platform = value.stringValue.flatMap(Platform.init(rawValue:)) else {
                throw .invalid("platform", "platform must be apns (an iPhone, the default), fcm (an Android phone) or web (a browser)")
            }
            return platform
        }
        self.platform = platform ?? .apns
        if self.platform == .web {
            guard json["token"] == nil else {
                throw .invalid("token", "a browser is registered by its subscription; its token is derived from the endpoint")
            }
            guard let value = json["subscription"] else {
                throw .invalid("subscription", "subscription is required for a browser: what PushSubscription.toJSON() gives")
            }
            let subscription = try ProviderJSON.subscription(value, "subscription")
            self.subscription = subscription
            self.token = subscription.token
        } else {
            guard json["subscription"] == nil else {
                throw .invalid("subscription", "subscription is for a browser (platform web)")
            }
            guard let token = json["token"] else { throw .invalid("token", "token is required") }
            self.subscription = nil
            self.token = try ProviderJSON.token(token, "token", platform: self.platform)
        }
        self.user = try json["user"].flatMap { value throws(ProviderError) in
            value == .null ? nil : try ProviderJSON.user(value, "user")
        }
        self.clientInfo = try json["client_info"].flatMap { value throws(ProviderError) in
            guard value != .null else { return nil }
            guard let text = value.stringValue, text.utf8.count <= 1024, !ProviderJSON.hasControlCharacters(text) else {
                throw .invalid("client_info", "client_info must be a string of at most 1,024 bytes without control characters")
            }
            return text
        }
    }
}

/// The checks both requests share.
enum ProviderJSON {
    static func object(_ body: [UInt8]) throws(ProviderError) -> JSON {
        do {
            return try JSON.parse(body)
        } catch {
            throw .invalid(nil, error.description)
        }
    }

    /// 64 hex digits, returned lower-case.
    /// A device token of `platform`; without one (a `to.tokens` list), either shape: 64 hex digits are an APNs token.
    static func token(_ value: JSON, _ field: String, platform: Platform? = nil) throws(ProviderError) -> String {
        guard let text = value.stringValue else { throw .invalid(field, "a device token is a string") }
        if platform == nil || platform == .apns, text.utf8.count == 64, text.utf8.allSatisfy({ Hex.value($0) != nil }) {
            return text.lowercased()
        }
        if platform == nil || platform == .fcm, FCMMessage.isToken(text) { return text }
        if platform == nil || platform == .web, WebPushSubscription.isToken(text) { return text }
        switch platform {
        case .apns: throw .invalid(field, "a device token is 64 hex digits")
        case .fcm: throw .invalid(field, "an FCM registration token is 100 to 4,096 letters, digits, '-', '_', ':' or '.'")
        case .web: throw .invalid(field, "a browser's token is web_ and 43 base64url characters, as its registration answered")
        case nil:
            throw .invalid(field, "a device token is 64 hex digits (APNs), an FCM registration token or a browser's web_ token")
        }
    }

    /// A browser's subscription, as `PushSubscription.toJSON()` gives it (its endpoint's addresses checked later).
    static func subscription(_ value: JSON, _ field: String) throws(ProviderError) -> WebPushSubscription {
        guard value.members != nil else {
            throw .invalid(field, "\(field) is an object: {\"endpoint\", \"keys\": {\"p256dh\", \"auth\"}}")
        }
        do {
            return try WebPushSubscription(json: Array(value.serialized.utf8))
        } catch {
            throw .invalid(field, error.reason)
        }
    }

    /// The application's user reference: 1 to 255 bytes, no control characters.
    static func user(_ value: JSON, _ field: String) throws(ProviderError) -> String {
        guard let text = value.stringValue, !text.isEmpty, text.utf8.count <= 255, !hasControlCharacters(text) else {
            throw .invalid(field, "a user is a string of 1 to 255 bytes without control characters")
        }
        return text
    }

    /// Control characters (NUL among them, which PostgreSQL's text cannot hold) in a value stored as text.
    static func hasControlCharacters(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }
}
