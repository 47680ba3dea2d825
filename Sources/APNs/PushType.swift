/// Apple's `apns-push-type` values, each with the topic suffix and payload limit Apple documents for it.
package enum PushType: String, CaseIterable, Sendable {
    case alert
    case background
    case voip
    case complication
    case fileprovider
    case mdm
    case location
    case liveactivity
    case pushtotalk
    case widgets
    case controls

    /// What a row that names no push type is sent as.
    package static let `default` = PushType.alert

    /// Largest payload over HTTP/2, in bytes: 5,120 for VoIP, 4,096 for the rest.
    package var payloadLimit: Int { self == .voip ? 5120 : 4096 }

    /// Apple refuses priority 10 for a background push (`content-available` alone).
    package var allowsImmediatePriority: Bool { self != .background }

    /// What Apple expects after the bundle id in `apns-topic`.
    package var topicSuffix: String {
        switch self {
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .location: ".location-query"
        case .pushtotalk: ".voip-ptt"
        case .liveactivity: ".push-type.liveactivity"
        default: ""
        }
    }

    /// The topic for this push type when the row names none: the app's bundle id with ``topicSuffix`` (once).
    package func topic(bundleID: String) -> String {
        topicSuffix.isEmpty || bundleID.hasSuffix(topicSuffix) ? bundleID : bundleID + topicSuffix
    }

    /// Every topic suffix Apple uses (VoIP, complications, file provider, location, PTT, live activities).
    package static let topicSuffixes = allCases.map(\.topicSuffix).filter { !$0.isEmpty }

    /// Whether `topic` is the app's: its bundle id, or that with one of Apple's suffixes. A token key signs for every
    /// app of its team, so a topic is the only thing that keeps one app's rows to that app.
    package static func topic(_ topic: String, belongsTo bundleID: String) -> Bool {
        topic == bundleID
            || (topic.hasPrefix(bundleID)
                && topicSuffixes.contains { topic.utf8.count == bundleID.utf8.count + $0.utf8.count && topic.hasSuffix($0) })
    }

    /// Every value, sorted, for error messages.
    package static var names: String { allCases.map(\.rawValue).sorted().joined(separator: ", ") }
}

/// `apns-priority`: 10 sends at once, 5 when it suits the device's power, 1 (HTTP/2 only) when it wakes the device
/// for nothing else.
package enum PushPriority: Int, CaseIterable, Sendable {
    case immediate = 10
    case considerate = 5
    case low = 1

    /// The binary interface knows 10 and 5 only.
    package var isBinary: Bool { self != .low }
}
