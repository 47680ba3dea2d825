import Foundation

/// What a push service answered to one `POST <endpoint>` (RFC 8030 §5–8), and what the daemon does about it.
package struct WebPushAnswer: Sendable, Equatable {
    package let status: Int
    /// The body's first 200 characters when it is text (push services explain refusals there), for `last_error`.
    package let reason: String?
    /// `Retry-After` in seconds (a number; an HTTP date is read as absent), at most an hour.
    package let retryAfter: Int?

    package init(status: Int, reason: String?, retryAfter: Int?) {
        self.status = status
        self.reason = reason
        self.retryAfter = retryAfter
    }

    /// Reads an answer's body and `Retry-After`.
    package init(status: Int, body: [UInt8], retryAfter: String?) {
        let text = String(decoding: body.prefix(400), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let printable = text.unicodeScalars.allSatisfy { $0.value >= 0x20 || $0 == "\n" || $0 == "\t" }
        let seconds = retryAfter.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.flatMap { $0 >= 0 ? $0 : nil }
        self.init(
            status: status,
            reason: (text.isEmpty || !printable) ? nil : String(text.prefix(200)),
            retryAfter: seconds.map { min($0, 3600) }
        )
    }

    package enum Verdict: Sendable, Equatable {
        /// 200, 201 or 202: the push service took it.
        case sent
        /// 404 or 410: the subscription is gone; failed, and recorded for the feedback job (as APNs' 410).
        case unregistered
        /// 413: the body is too large for this push service; failed as unencodable.
        case tooLarge
        /// 400 or another 4xx about this message: failed for good, with the push service's reason.
        case failed
        /// 401 or 403: the push service refuses the VAPID token or key. Failed, never a deletion; when most answers
        /// say so the key is wrong (an alarm, as refused APNs credentials).
        case vapidRefused
        /// 429 or 5xx: try again after `Retry-After` seconds, else with backoff (nil).
        case retryLater(after: Int?)
    }

    package var verdict: Verdict {
        switch status {
        case 200...202: return .sent
        case 404, 410: return .unregistered
        case 413: return .tooLarge
        case 401, 403: return .vapidRefused
        case 429, 500...599: return .retryLater(after: retryAfter)
        default: return .failed
        }
    }
}
