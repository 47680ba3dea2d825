package import Foundation
import NIOCore

/// A `push_queue` row claimed for sending.
///
/// A row is copied at every step from its claim to its result (held ahead, written, in the window, answered): what
/// does not change sits behind one reference, so a copy retains one object instead of each string (the copies' retains
/// and releases were a tenth of the binary daemon's CPU in a field profile, each string a cache line shared between the
/// claimer's and the writer's threads).
package struct QueuedNotification: Sendable, Equatable {
    package let messageID: Int64
    /// Times this daemon retried it after a processing error (binary status 1 or 255).
    package var retries = 0
    /// Queued by a broadcast (`push_queue.bulk`): a connection writes the other rows it holds first.
    package var bulk = false
    /// Everything else, immutable, shared between copies of the row and read field by field.
    private let fields: Fields

    private final class Fields: Sendable, Equatable {
        let deviceToken: String
        let payload: String
        let queuedAt: Date?
        /// What few rows set, behind one more reference (nil for most): a binary window holds `push_window` rows, so
        /// each byte of every row counts.
        let options: Options?

        init(deviceToken: String, payload: String, queuedAt: Date?, options: Options?) {
            self.deviceToken = deviceToken
            self.payload = payload
            self.queuedAt = queuedAt
            self.options = options
        }

        static func == (lhs: Fields, rhs: Fields) -> Bool {
            lhs === rhs
                || (lhs.deviceToken == rhs.deviceToken && lhs.payload == rhs.payload && lhs.queuedAt == rhs.queuedAt
                    && lhs.options == rhs.options)
        }
    }

    private final class Options: Sendable, Equatable {
        let priority: Int?
        let expiration: Date?
        let collapseID: String?
        let pushType: String?
        let topic: String?
        let app: String?

        init(priority: Int?, expiration: Date?, collapseID: String?, pushType: String?, topic: String?, app: String?) {
            self.priority = priority
            self.expiration = expiration
            self.collapseID = collapseID
            self.pushType = pushType
            self.topic = topic
            self.app = app
        }

        static func == (lhs: Options, rhs: Options) -> Bool {
            lhs.priority == rhs.priority && lhs.expiration == rhs.expiration && lhs.collapseID == rhs.collapseID
                && lhs.pushType == rhs.pushType && lhs.topic == rhs.topic && lhs.app == rhs.app
        }
    }

    package var deviceToken: String { fields.deviceToken }
    package var payload: String { fields.payload }
    /// When it was queued: rows without their own expiration expire `apns_expiry` seconds after this, the same
    /// instant on every attempt.
    package var queuedAt: Date? { fields.queuedAt }
    /// The row's own priority and expiration, when set (else the daemon's defaults).
    package var priority: Int? { fields.options?.priority }
    package var expiration: Date? { fields.options?.expiration }
    /// HTTP/2 only: the row's `apns-collapse-id` and `apns-push-type` (default `alert`).
    package var collapseID: String? { fields.options?.collapseID }
    package var pushType: String? { fields.options?.pushType }
    /// HTTP/2 only: the row's `apns-topic` (default: the daemon's `apns_topic`, suffixed as the push type needs).
    package var topic: String? { fields.options?.topic }
    /// The row's app (`push_queue.app`); nil for the default app (most rows: nothing stored).
    package var app: String? { fields.options?.app }

    package init(
        messageID: Int64,
        deviceToken: String,
        payload: String,
        priority: Int? = nil,
        expiration: Date? = nil,
        collapseID: String? = nil,
        pushType: String? = nil,
        topic: String? = nil,
        queuedAt: Date? = nil,
        app: String? = nil
    ) {
        self.messageID = messageID
        let none = priority == nil && expiration == nil && collapseID == nil && pushType == nil && topic == nil && app == nil
        fields = Fields(
            deviceToken: deviceToken,
            payload: payload,
            queuedAt: queuedAt,
            options: none
                ? nil
                : Options(priority: priority, expiration: expiration, collapseID: collapseID, pushType: pushType, topic: topic, app: app)
        )
    }

    /// The expiry APNs gets, in epoch seconds (0: deliver once, do not store): the row's own `expiration`, else
    /// `defaultExpiry` seconds after it was queued (after `now` for a row that does not say when).
    package func expiry(defaultExpiry: UInt32, now: Date) -> Int64 {
        if let expiration { return max(0, Int64(expiration.timeIntervalSince1970)) }
        guard defaultExpiry > 0 else { return 0 }
        return Int64((queuedAt ?? now).timeIntervalSince1970) + Int64(defaultExpiry)
    }

    /// Past its expiry: APNs would not deliver it any more, so it is failed as expired instead of sent (again).
    package func isExpired(defaultExpiry: UInt32, now: Date) -> Bool {
        let expiry = expiry(defaultExpiry: defaultExpiry, now: now)
        return expiry > 0 && Double(expiry) < now.timeIntervalSince1970
    }

    /// The binary notification identifier: the message id's low 32 bits (unique within any in-flight window).
    package var wireIdentifier: UInt32 { UInt32(truncatingIfNeeded: messageID) }
}
