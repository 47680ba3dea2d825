import Foundation
import NIOCore
import Settings
import Support

/// A `push_queue` row claimed for sending.
public struct QueuedNotification: Sendable, Equatable {
    public let messageID: Int64
    public let deviceToken: String
    public let payload: String
    /// The row's own priority and expiration, when set (else the daemon's defaults).
    public let priority: Int?
    public let expiration: Date?
    /// HTTP/2 only: the row's `apns-collapse-id` and `apns-push-type` (default `alert`).
    public let collapseID: String?
    public let pushType: String?
    /// Times this daemon retried it after a processing error (binary status 1 or 255).
    public var retries = 0

    public init(
        messageID: Int64,
        deviceToken: String,
        payload: String,
        priority: Int? = nil,
        expiration: Date? = nil,
        collapseID: String? = nil,
        pushType: String? = nil
    ) {
        self.messageID = messageID
        self.deviceToken = deviceToken
        self.payload = payload
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.pushType = pushType
    }

    /// The binary notification identifier: the message id's low 32 bits (unique within any in-flight window).
    public var wireIdentifier: UInt32 { UInt32(truncatingIfNeeded: messageID) }
}
