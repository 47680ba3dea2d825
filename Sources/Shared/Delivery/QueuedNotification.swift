import Foundation
import NIOCore

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

/// Why a row can never be sent (it is failed at once, not retried).
public struct UnsendableReason: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String
}

/// Encodes claimed rows as command 2 frames.
public struct BinaryEncoder: Sendable {
    /// Seconds from now until APNs stops trying (0: deliver once, do not store).
    public var expiry: UInt32
    /// 10 (now) or 5 (power-considerate).
    public var priority: UInt8

    public init(expiry: UInt32, priority: UInt8) {
        self.expiry = expiry
        self.priority = priority
    }

    /// Appends the row's frame, or says why it can never be sent.
    public func write(_ notification: QueuedNotification, into buffer: inout ByteBuffer, now: Date) -> UnsendableReason? {
        let tokenUTF8 = notification.deviceToken.utf8
        guard tokenUTF8.count == DeviceToken.binaryLength * 2, let token = DeviceToken.bytes(hex: notification.deviceToken) else {
            return UnsendableReason(description: "device token is not \(DeviceToken.binaryLength * 2) hex digits")
        }
        let payload = notification.payload.utf8
        guard !payload.isEmpty else { return UnsendableReason(description: "empty payload") }
        guard payload.count <= BinaryNotification.Format.frame.payloadLimit else {
            return UnsendableReason(description: "payload of \(payload.count) bytes exceeds the binary limit of 2048")
        }
        let priority = notification.priority.flatMap { $0 == 5 || $0 == 10 ? UInt8($0) : nil } ?? self.priority
        let expiry: UInt32
        if let expiration = notification.expiration {
            expiry = UInt32(clamping: max(0, Int64(expiration.timeIntervalSince1970)))
        } else {
            expiry = self.expiry == 0 ? 0 : UInt32(clamping: Int64(now.timeIntervalSince1970) + Int64(self.expiry))
        }
        BinaryFrame.writeFrame(
            into: &buffer,
            token: token,
            payload: payload,
            identifier: notification.wireIdentifier,
            expiry: expiry,
            priority: priority
        )
        return nil
    }
}
