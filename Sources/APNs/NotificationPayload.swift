package import Settings
package import Support

/// A provider notification's payload: Apple's `aps` dictionary, checked, and the sender's own top-level keys beside
/// it (Server Density's `"server": {…}`), serialized as `{"aps":{…},…}` in the order the sender wrote them.
package struct NotificationPayload: Sendable, Equatable {
    /// The JSON text queued and sent.
    package let json: String
    /// `aps.badge`, when set.
    package let badge: Int?
    /// `aps` holds `content-available` and nothing a user sees (no alert, badge or sound): a silent background push.
    package let isSilent: Bool

    /// Checks `aps` (an object with something to deliver; each key Apple defines of the type Apple says) and `data`
    /// (an object without `aps`), and builds the payload.
    package init(aps: JSON, data: JSON?) throws(PayloadError) {
        guard let members = aps.members else { throw PayloadError("aps", "aps must be an object, not \(aps.kind)") }
        var badge: Int?
        for member in members {
            let field = "aps.\(member.key)"
            guard let rule = Self.rules[member.key] else {
                throw PayloadError(field, "unknown aps key \(JSONText.quoted(member.key)); custom keys belong in data")
            }
            try rule.check(member.value, field: field)
            if member.key == "badge", let value = member.value.integerValue { badge = Int(value) }
        }
        let visible = ["alert", "badge", "sound"].contains { aps[$0] != nil }
        guard visible || aps["content-available"] != nil || aps["event"] != nil else {
            throw PayloadError("aps", "aps has nothing to deliver: give alert, badge, sound or content-available")
        }
        var top = [JSON.Member("aps", aps)]
        if let data {
            guard let custom = data.members else { throw PayloadError("data", "data must be an object, not \(data.kind)") }
            if custom.contains(where: { $0.key == "aps" }) {
                throw PayloadError("data.aps", "data must not hold aps: Apple's keys go in aps")
            }
            top += custom
        }
        self.json = JSON.object(top).serialized
        self.badge = badge
        self.isSilent = !visible && aps["content-available"] != nil
    }

    /// The largest payload, in bytes, the daemon's interface and the push type allow: 2,048 over the binary
    /// interface; over HTTP/2 4,096, or 5,120 for VoIP.
    package static func maximumBytes(transport: APNsTransport, pushType: PushType) -> Int {
        switch transport {
        case .binary: BinaryNotification.Format.frame.payloadLimit
        case .http2: pushType.payloadLimit
        }
    }

    /// How each `aps` key Apple documents must look.
    enum Rule {
        case string
        case stringOrObject(object: [String: Rule])
        case one
        case nonNegativeInteger
        case number(ClosedRange<Double>)
        case oneOf(Set<String>)
        case stringArray
        case object
        case integer

        func check(_ value: JSON, field: String) throws(PayloadError) {
            switch self {
            case .string:
                guard value.stringValue != nil else { throw PayloadError(field, "\(field) must be a string, not \(value.kind)") }
            case .stringOrObject(let keys):
                if value.stringValue != nil { return }
                guard let members = value.members else {
                    throw PayloadError(field, "\(field) must be a string or an object, not \(value.kind)")
                }
                for member in members {
                    // Keys Apple may add later pass through; the ones it documents are checked.
                    try keys[member.key]?.check(member.value, field: "\(field).\(member.key)")
                }
            case .one:
                guard value.integerValue == 1 else { throw PayloadError(field, "\(field) must be 1 (leave it out for 0)") }
            case .nonNegativeInteger:
                guard let number = value.integerValue, number >= 0, number <= Int64(Int32.max) else {
                    throw PayloadError(field, "\(field) must be a whole number from 0 to \(Int32.max)")
                }
            case .integer:
                guard value.integerValue != nil else { throw PayloadError(field, "\(field) must be a whole number") }
            case .number(let range):
                guard let number = value.doubleValue, range.contains(number) else {
                    throw PayloadError(field, "\(field) must be a number from \(range.lowerBound) to \(range.upperBound)")
                }
            case .oneOf(let values):
                guard let text = value.stringValue, values.contains(text) else {
                    throw PayloadError(field, "\(field) must be one of \(values.sorted().joined(separator: ", "))")
                }
            case .stringArray:
                guard let elements = value.elements, elements.allSatisfy({ $0.stringValue != nil }) else {
                    throw PayloadError(field, "\(field) must be an array of strings")
                }
            case .object:
                guard value.members != nil else { throw PayloadError(field, "\(field) must be an object, not \(value.kind)") }
            }
        }
    }

    static let alertRules: [String: Rule] = [
        "title": .string, "subtitle": .string, "body": .string, "launch-image": .string,
        "title-loc-key": .string, "title-loc-args": .stringArray, "subtitle-loc-key": .string,
        "subtitle-loc-args": .stringArray, "loc-key": .string, "loc-args": .stringArray, "action-loc-key": .string,
        "summary-arg": .string, "summary-arg-count": .nonNegativeInteger,
    ]

    static let rules: [String: Rule] = [
        "alert": .stringOrObject(object: alertRules),
        "badge": .nonNegativeInteger,
        "sound": .stringOrObject(object: ["critical": .integer, "name": .string, "volume": .number(0...1)]),
        "content-available": .one,
        "mutable-content": .one,
        "category": .string,
        "thread-id": .string,
        "target-content-id": .string,
        "interruption-level": .oneOf(["passive", "active", "time-sensitive", "critical"]),
        "relevance-score": .number(0...1),
        "filter-criteria": .string,
        "url-args": .stringArray,
        // Live Activities.
        "timestamp": .nonNegativeInteger,
        "event": .oneOf(["start", "update", "end"]),
        "content-state": .object,
        "stale-date": .nonNegativeInteger,
        "dismissal-date": .nonNegativeInteger,
        "attributes-type": .string,
        "attributes": .object,
        "input-push-token": .one,
    ]
}

/// A payload refused: which field (`aps.badge`, `data`) and why.
package struct PayloadError: PushChatError, Equatable {
    package typealias Code = ErrorCode<PayloadError>
    package var code: Code { .invalidPayload }
    package let field: String
    package let reason: String
    package var description: String { reason }

    package init(_ field: String, _ reason: String) {
        self.field = field
        self.reason = reason
    }
}

extension ErrorCode where Domain == PayloadError {
    package static let invalidPayload = Self("invalid_payload")
}
