package import Foundation
package import HTTP2Client

/// What APNs answered on one stream, and what the daemon does about it.
package struct HTTP2Result: Sendable, Equatable {
    package let status: Int
    package let reason: String?
    /// With 410: when APNs learned the token is no longer valid.
    package let timestamp: Date?

    package init(status: Int, reason: String?, timestamp: Date?) {
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
    }

    /// What APNs meant by `answer`.
    package init(_ answer: HTTP2Answer) { self.init(status: answer.status, body: answer.body) }

    /// Parses the JSON body `{"reason":"…","timestamp":1700000000000}` (empty on 200).
    package init(status: Int, body: [UInt8]) {
        var reason: String?
        var timestamp: Date?
        if !body.isEmpty, let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] {
            reason = object["reason"] as? String
            if let milliseconds = (object["timestamp"] as? NSNumber)?.doubleValue {
                timestamp = Date(timeIntervalSince1970: milliseconds / 1000)
            }
        }
        self.init(status: status, reason: reason, timestamp: timestamp)
    }

    package enum Verdict: Sendable, Equatable {
        case sent
        /// 410: Apple says to stop sending to this token. Failed, and the token recorded for the feedback job with
        /// Apple's timestamp (`since`; nil: the database's clock).
        case unregistered(since: Date?)
        /// 400 `BadDeviceToken` / `DeviceTokenNotForTopic`: not valid for this topic and environment. Failed, but
        /// never a reason to delete a user (when most answers say so, the provider is misconfigured).
        case wrongEnvironment
        /// Failed for good (another 4xx).
        case failed
        /// Try this row again later (429 for its token; 500/503).
        case retryLater
        /// 403 ExpiredProviderToken: make a new token and resend.
        case expiredToken
        /// Another 403: the credentials are wrong; keep rows queued and say so loudly.
        case authenticationFailed
    }

    /// Apple's documented handling of each answer.
    package var verdict: Verdict {
        switch (status, reason ?? "") {
        case (200, _): .sent
        case (410, _): .unregistered(since: timestamp)
        case (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"): .wrongEnvironment
        case (403, "ExpiredProviderToken"): .expiredToken
        case (403, _): .authenticationFailed
        case (429, _), (500...599, _): .retryLater
        default: .failed
        }
    }

    /// `410 Unregistered`, as stored in `last_status`.
    package var statusText: String { reason.map { "\(status) \($0)" } ?? "\(status)" }
}
