package import Settings
import Support
package import WebPush

/// A validated request to the PushChat API (`POST /api.php`, field `cmd`).
///
/// Validation follows the tutorial's server: fields are trimmed, the first problem found is reported with one of
/// the fixed `X-Error-Description` texts, and nothing is written for a bad request.
package enum APIRequest: Sendable, Equatable {
    /// Join a room: replaces any earlier registration of the device. `platform=fcm` (an Android app) makes the token
    /// an FCM registration token, `platform=web` (a browser) its push subscription's JSON (`token` is then the
    /// subscription's derived `web_` token); the PushChat apps never send it and stay `apns`.
    case join(udid: String, token: String, name: String, code: String, platform: Platform = .apns, subscription: WebPushSubscription? = nil)
    /// Leave the room.
    case leave(udid: String)
    /// Register a new device token (of `platform`, as at `join`).
    case update(udid: String, token: String, platform: Platform = .apns, subscription: WebPushSubscription? = nil)
    /// Send `text` to everyone else in the sender's room.
    case message(udid: String, text: String)
    /// The room's stored messages with an id greater than `since`.
    case fetch(udid: String, since: Int64)

    /// The token a device sends before it has one from APNs; it receives no notifications.
    package static let noToken = "0"
    /// Longest name or secret code, in UTF-8 bytes.
    package static let maximumNameBytes = 255
    /// Longest message text, in UTF-8 bytes.
    package static let maximumTextBytes = 190

    /// The command name, for logs.
    package var command: String {
        switch self {
        case .join: "join"
        case .leave: "leave"
        case .update: "update"
        case .message: "message"
        case .fetch: "fetch"
        }
    }

    /// The device the request is from.
    package var udid: String {
        switch self {
        case .join(let udid, _, _, _, _, _), .leave(let udid), .update(let udid, _, _, _), .message(let udid, _), .fetch(let udid, _): udid
        }
    }

    /// Validates a submitted form.
    package init(fields: FormFields) throws(APIRequestError) {
        let command = fields["cmd"].map { String(decoding: FormValue.trimmed($0), as: UTF8.self) }
        switch command {
        case "join":
            let udid = try FormValue.udid(fields)
            let platform = try FormValue.platform(fields)
            let subscription = try FormValue.subscription(fields, allowNoToken: true, platform: platform)
            var token = subscription?.token ?? ""
            if subscription == nil { token = try FormValue.token(fields, allowNoToken: true, platform: platform) }
            let name = try FormValue.text(fields, "name", missing: .missingName, invalid: .invalidName, maxBytes: Self.maximumNameBytes)
            let code = try FormValue.text(fields, "code", missing: .missingCode, invalid: .invalidCode, maxBytes: Self.maximumNameBytes)
            self = .join(udid: udid, token: token, name: name, code: code, platform: platform, subscription: subscription)
        case "leave":
            self = .leave(udid: try FormValue.udid(fields))
        case "update":
            let udid = try FormValue.udid(fields)
            let platform = try FormValue.platform(fields)
            let subscription = try FormValue.subscription(fields, allowNoToken: false, platform: platform)
            var token = subscription?.token ?? ""
            if subscription == nil { token = try FormValue.token(fields, allowNoToken: false, platform: platform) }
            self = .update(udid: udid, token: token, platform: platform, subscription: subscription)
        case "message":
            let udid = try FormValue.udid(fields)
            let text = try FormValue.text(
                fields,
                "text",
                missing: .missingText,
                invalid: .invalidText,
                maxBytes: Self.maximumTextBytes,
                allowNewlines: true
            )
            self = .message(udid: udid, text: text)
        case "fetch":
            let udid = try FormValue.udid(fields)
            self = .fetch(udid: udid, since: try FormValue.since(fields))
        default:
            throw .unknownCommand
        }
    }
}

/// Why a request was refused: the exact text of the `X-Error-Description` header.
package struct APIRequestError: PushChatError, Equatable {
    package let description: String
    /// The code is the wire text (`Missing udid`): the app and its forms match on it.
    package var code: String { description }
    package var reason: String { description }

    package static let unknownCommand = Self(description: "Unknown command")
    package static let missingUdid = Self(description: "Missing udid")
    package static let invalidUdid = Self(description: "Invalid udid")
    /// The 2013 app's name for the udid field.
    package static let missingUserID = Self(description: "Missing user_id")
    package static let invalidUserID = Self(description: "Invalid user_id")
    package static let missingToken = Self(description: "Missing device token")
    package static let invalidToken = Self(description: "Invalid device token")
    /// `platform` is neither `apns`, `fcm` nor `web`.
    package static let invalidPlatform = Self(description: "Invalid platform")
    /// `platform=web` and `token` is not a browser's subscription, or its endpoint may not be used (the reason follows).
    package static func invalidSubscription(_ reason: String) -> Self { Self(description: "Invalid subscription: \(reason)") }
    package static let missingName = Self(description: "Missing name")
    package static let invalidName = Self(description: "Invalid name")
    package static let missingCode = Self(description: "Missing code")
    package static let invalidCode = Self(description: "Invalid code")
    package static let missingText = Self(description: "Missing text")
    package static let invalidText = Self(description: "Invalid text")
    /// `fetch` only: `since` is not a non-negative message id.
    package static let invalidSince = Self(description: "Invalid since")
}
