import Foundation
import NIOCore
import Settings
import Support

/// Encodes claimed rows as command 2 frames.
package struct BinaryEncoder: Sendable {
    /// Seconds from now until APNs stops trying (0: deliver once, do not store).
    package var expiry: UInt32
    /// 10 (now) or 5 (power-considerate).
    package var priority: UInt8

    package init(expiry: UInt32, priority: UInt8) {
        self.expiry = expiry
        self.priority = priority
    }

    /// Appends the row's frame, or says why it can never be sent.
    package func write(_ notification: QueuedNotification, into buffer: inout ByteBuffer, now: Date) -> UnsendableReason? {
        let tokenUTF8 = notification.deviceToken.utf8
        guard tokenUTF8.count == DeviceToken.binaryLength * 2, let token = DeviceToken.bytes(hex: notification.deviceToken) else {
            return UnsendableReason(description: "device token is not \(DeviceToken.binaryLength * 2) hex digits")
        }
        let payload = notification.payload.utf8
        guard !payload.isEmpty else { return UnsendableReason(description: "empty payload") }
        guard payload.count <= BinaryNotification.Format.frame.payloadLimit else {
            return UnsendableReason(
                description: "payload of \(payload.count) bytes exceeds the binary limit of \(BinaryNotification.Format.frame.payloadLimit)"
            )
        }
        // A priority the binary interface does not know (1) is sent as the daemon's default.
        let priority =
            notification.priority.flatMap(PushPriority.init(rawValue:)).flatMap { $0.isBinary ? UInt8($0.rawValue) : nil } ?? self.priority
        let expiry = UInt32(clamping: notification.expiry(defaultExpiry: self.expiry, now: now))
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
