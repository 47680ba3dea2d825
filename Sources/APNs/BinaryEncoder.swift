package import Foundation
package import NIOCore
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

    /// One row's command 2 frame, checked and ready to write.
    package struct Frame: Sendable {
        package let notification: QueuedNotification
        let token: DeviceToken.Binary
        let expiry: UInt32
        let priority: UInt8

        /// Appends the frame.
        package func write(into buffer: inout ByteBuffer) {
            token.withUnsafeBytes { token in
                BinaryFrame.writeFrame(
                    into: &buffer,
                    token: token,
                    payload: notification.payload.utf8,
                    identifier: notification.wireIdentifier,
                    expiry: expiry,
                    priority: priority
                )
            }
        }
    }

    /// The row's frame, or why it can never be sent.
    package func frame(_ notification: QueuedNotification, now: Date) -> Result<Frame, UnsendableReason> {
        guard let token = DeviceToken.Binary(hex: notification.deviceToken) else {
            return .failure(UnsendableReason(description: "device token is not \(DeviceToken.binaryLength * 2) hex digits"))
        }
        let payload = notification.payload.utf8
        guard !payload.isEmpty else { return .failure(UnsendableReason(description: "empty payload")) }
        guard payload.count <= BinaryNotification.Format.frame.payloadLimit else {
            return .failure(
                UnsendableReason(
                    description:
                        "payload of \(payload.count) bytes exceeds the binary limit of \(BinaryNotification.Format.frame.payloadLimit)"
                )
            )
        }
        // A priority the binary interface does not know (1) is sent as the daemon's default.
        let priority =
            notification.priority.flatMap(PushPriority.init(rawValue:)).flatMap { $0.isBinary ? UInt8($0.rawValue) : nil } ?? self.priority
        let expiry = UInt32(clamping: notification.expiry(defaultExpiry: self.expiry, now: now))
        return .success(Frame(notification: notification, token: token, expiry: expiry, priority: priority))
    }

    /// Appends the row's frame, or says why it can never be sent.
    package func write(_ notification: QueuedNotification, into buffer: inout ByteBuffer, now: Date) -> UnsendableReason? {
        switch frame(notification, now: now) {
        case .success(let frame):
            frame.write(into: &buffer)
            return nil
        case .failure(let reason):
            return reason
        }
    }
}
