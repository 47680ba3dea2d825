package import Foundation
import Support

/// What FCM's HTTP v1 API answered to one `messages:send`, and what the daemon does about it.
///
/// Errors are `{"error": {"code": 404, "message": "…", "status": "NOT_FOUND", "details": [{"@type":
/// "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "UNREGISTERED"}]}}`.
package struct FCMAnswer: Sendable, Equatable {
    package let status: Int
    /// The canonical status (`NOT_FOUND`, `INVALID_ARGUMENT`, …).
    package let errorStatus: String?
    /// The FcmError detail's `errorCode` (`UNREGISTERED`, `SENDER_ID_MISMATCH`, `QUOTA_EXCEEDED`, …).
    package let errorCode: String?
    /// The error's message (at most 200 characters kept, for `last_error`).
    package let message: String?
    /// The `Retry-After` header, in seconds (a number; an HTTP date is read as absent).
    package let retryAfter: Int?

    package init(status: Int, errorStatus: String?, errorCode: String?, message: String?, retryAfter: Int?) {
        self.status = status
        self.errorStatus = errorStatus
        self.errorCode = errorCode
        self.message = message
        self.retryAfter = retryAfter
    }

    /// Parses an answer's body (JSON or anything else: a proxy's HTML page leaves the fields nil) and `Retry-After`.
    package init(status: Int, body: [UInt8], retryAfter: String?) {
        var errorStatus: String?
        var errorCode: String?
        var message: String?
        if status != 200, !body.isEmpty, let json = try? JSON.parse(body), let error = json["error"] {
            errorStatus = error["status"]?.stringValue
            message = error["message"]?.stringValue.map { String($0.prefix(200)) }
            for detail in error["details"]?.elements ?? [] where detail["@type"]?.stringValue?.hasSuffix(".FcmError") == true {
                errorCode = detail["errorCode"]?.stringValue
            }
        }
        let seconds = retryAfter.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.flatMap { $0 >= 0 ? $0 : nil }
        self.init(
            status: status,
            errorStatus: errorStatus,
            errorCode: errorCode,
            message: message,
            retryAfter: seconds.map { min($0, 3600) }
        )
    }

    package enum Verdict: Sendable, Equatable {
        case sent
        /// `UNREGISTERED` (404): stop sending to this token; failed, and recorded for the feedback job (the
        /// counterpart of APNs' 410).
        case unregistered
        /// `INVALID_ARGUMENT` (400) or another 4xx about this message: failed for good.
        case failed
        /// `SENDER_ID_MISMATCH` (403) or `THIRD_PARTY_AUTH_ERROR`: failed, never a deletion; when most answers say so
        /// the project or the credentials are wrong (an alarm).
        case misconfigured
        /// 401: the access token is refused: get a new one and send again.
        case refreshToken
        /// `QUOTA_EXCEEDED` (429), `UNAVAILABLE` (503), `INTERNAL` (500): try again after `Retry-After` seconds, else
        /// with backoff (nil).
        case retryLater(after: Int?)
    }

    /// Google's documented handling of each answer.
    package var verdict: Verdict {
        if status == 200 { return .sent }
        switch errorCode {
        case "UNREGISTERED": return .unregistered
        case "SENDER_ID_MISMATCH", "THIRD_PARTY_AUTH_ERROR": return .misconfigured
        case "QUOTA_EXCEEDED", "UNAVAILABLE", "INTERNAL": return .retryLater(after: retryAfter)
        case "INVALID_ARGUMENT": return .failed
        default: break
        }
        switch status {
        case 401: return .refreshToken
        case 403: return .misconfigured
        case 404 where errorStatus == "NOT_FOUND" && errorCode == nil: return .failed
        case 429, 500...599: return .retryLater(after: retryAfter)
        default: return .failed
        }
    }

    /// As stored in `last_status`: `404 UNREGISTERED`, `400 INVALID_ARGUMENT`, `200`.
    package var statusText: String {
        guard status != 200, let name = errorCode ?? errorStatus else { return "\(status)" }
        return "\(status) \(name)"
    }
}
