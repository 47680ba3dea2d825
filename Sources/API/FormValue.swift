import FCM
import Settings
import Support
import WebPush

/// Field validators shared by the API commands.
enum FormValue {
    /// PHP's `trim()` set: space, tab, newline, carriage return, NUL and vertical tab.
    static func trimmed(_ bytes: [UInt8]) -> ArraySlice<UInt8> {
        let blank: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D, 0x00, 0x0B]
        guard let first = bytes.firstIndex(where: { !blank.contains($0) }),
            let last = bytes.lastIndex(where: { !blank.contains($0) })
        else { return [] }
        return bytes[first...last]
    }

    /// The device's id from `udid` (the 2011 app) or `user_id` (the 2013 app: an NSUUID without dashes, upper-case):
    /// 40 hex digits (a UDID), 32 hex digits, or a UUID with dashes (identifierForVendor); returned as lower-case
    /// hex without dashes, so both fields name the same device. Errors name the field the client used.
    static func udid(_ fields: FormFields) throws(APIRequestError) -> String {
        let raw: [UInt8]
        let missing: APIRequestError
        let invalid: APIRequestError
        if let udid = fields["udid"] {
            (raw, missing, invalid) = (udid, .missingUdid, .invalidUdid)
        } else if let userID = fields["user_id"] {
            (raw, missing, invalid) = (userID, .missingUserID, .invalidUserID)
        } else {
            throw .missingUdid
        }
        let value = trimmed(raw)
        if value.isEmpty && missing == .missingUserID { throw missing }
        var hex = Array(value)
        if value.count == 36 {
            let dashes = [8, 13, 18, 23]
            guard dashes.allSatisfy({ value[value.startIndex + $0] == UInt8(ascii: "-") }) else { throw invalid }
            hex.removeAll { $0 == UInt8(ascii: "-") }
        }
        guard hex.count == 40 || hex.count == 32, let normalised = lowercaseHex(hex) else { throw invalid }
        return normalised
    }

    /// 64 hex digits, returned lower-case; `"0"` where the device may not have a token yet.
    static func token(_ fields: FormFields, allowNoToken: Bool, platform: Platform = .apns) throws(APIRequestError) -> String {
        guard let raw = fields["token"] else { throw .missingToken }
        let value = trimmed(raw)
        if allowNoToken && value.elementsEqual(APIRequest.noToken.utf8) { return APIRequest.noToken }
        switch platform {
        case .apns:
            guard value.count == 64, let token = lowercaseHex(value) else { throw .invalidToken }
            return token
        case .fcm:
            // Case-sensitive, kept as FCM gave it.
            guard let token = String(validating: value, as: UTF8.self), FCMMessage.isToken(token) else { throw .invalidToken }
            return token
        case .web:
            // A browser sends its subscription (``subscription(_:allowNoToken:platform:)``); its derived token is
            // taken where one is named.
            guard let token = String(validating: value, as: UTF8.self), WebPushSubscription.isToken(token) else { throw .invalidToken }
            return token
        }
    }

    /// A browser's `token` (`platform=web`): its push subscription's JSON as `PushSubscription.toJSON()` gives it; nil
    /// for another platform, or `"0"` where the device may not have one yet.
    static func subscription(_ fields: FormFields, allowNoToken: Bool, platform: Platform) throws(APIRequestError) -> WebPushSubscription? {
        guard platform == .web else { return nil }
        guard let raw = fields["token"] else { throw .missingToken }
        let value = trimmed(raw)
        if allowNoToken && value.elementsEqual(APIRequest.noToken.utf8) { return nil }
        do {
            return try WebPushSubscription(json: Array(value))
        } catch {
            throw .invalidSubscription(error.reason)
        }
    }

    /// The optional `platform` field: `apns` when absent (the PushChat apps), `apns` or `fcm` otherwise.
    static func platform(_ fields: FormFields) throws(APIRequestError) -> Platform {
        guard let raw = fields["platform"] else { return .apns }
        guard let text = String(validating: trimmed(raw), as: UTF8.self), let platform = Platform(rawValue: text) else {
            throw .invalidPlatform
        }
        return platform
    }

    /// Non-empty valid UTF-8 of at most `maxBytes` bytes, without control characters (newlines allowed in text).
    static func text(
        _ fields: FormFields,
        _ name: String,
        missing: APIRequestError,
        invalid: APIRequestError,
        maxBytes: Int,
        allowNewlines: Bool = false
    ) throws(APIRequestError) -> String {
        guard let raw = fields[name] else { throw missing }
        let value = trimmed(raw)
        guard !value.isEmpty, value.count <= maxBytes, let string = String(validating: value, as: UTF8.self) else {
            throw invalid
        }
        for scalar in string.unicodeScalars where scalar.properties.generalCategory == .control {
            if allowNewlines && (scalar == "\n" || scalar == "\r") { continue }
            throw invalid
        }
        return string
    }

    /// `fetch`'s optional `since`: a message id, 0 when absent.
    static func since(_ fields: FormFields) throws(APIRequestError) -> Int64 {
        guard let raw = fields["since"] else { return 0 }
        let value = trimmed(raw)
        if value.isEmpty { return 0 }
        guard value.count <= 19, value.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let since = Int64(String(decoding: value, as: UTF8.self))
        else { throw .invalidSince }
        return since
    }

    private static func lowercaseHex<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String? {
        var result = ""
        result.reserveCapacity(bytes.count)
        for byte in bytes {
            guard Hex.value(byte) != nil else { return nil }
            result.unicodeScalars.append(Unicode.Scalar(byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F") ? byte + 32 : byte))
        }
        return result
    }
}
