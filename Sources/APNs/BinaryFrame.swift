package import NIOCore

/// Writing binary frames, as the push daemon sends them.
package enum BinaryFrame {
    package static let tokenItem: UInt8 = 1
    package static let payloadItem: UInt8 = 2
    package static let identifierItem: UInt8 = 3
    package static let expiryItem: UInt8 = 4
    package static let priorityItem: UInt8 = 5

    /// Bytes a command 2 frame takes for a payload of `payloadLength` bytes.
    package static func frameSize(payloadLength: Int) -> Int {
        1 + 4 + (3 + 32) + (3 + payloadLength) + (3 + 4) + (3 + 4) + (3 + 1)
    }

    /// Appends a command 2 frame with all five items. `token` must be 32 bytes.
    package static func writeFrame<Token: Collection<UInt8>, Payload: Collection<UInt8>>(
        into buffer: inout ByteBuffer,
        token: Token,
        payload: Payload,
        identifier: UInt32,
        expiry: UInt32,
        priority: UInt8
    ) {
        buffer.writeInteger(BinaryNotification.Format.frame.rawValue)
        buffer.writeInteger(UInt32(frameSize(payloadLength: payload.count) - 5 - DeviceToken.binaryLength + token.count))
        buffer.writeInteger(tokenItem)
        buffer.writeInteger(UInt16(token.count))
        buffer.writeBytes(token)
        buffer.writeInteger(payloadItem)
        buffer.writeInteger(UInt16(payload.count))
        buffer.writeBytes(payload)
        buffer.writeInteger(identifierItem)
        buffer.writeInteger(UInt16(4))
        buffer.writeInteger(identifier)
        buffer.writeInteger(expiryItem)
        buffer.writeInteger(UInt16(4))
        buffer.writeInteger(expiry)
        buffer.writeInteger(priorityItem)
        buffer.writeInteger(UInt16(1))
        buffer.writeInteger(priority)
    }

    /// Appends a command 0 (simple) notification.
    package static func writeSimple(into buffer: inout ByteBuffer, token: [UInt8], payload: [UInt8]) {
        buffer.writeInteger(BinaryNotification.Format.simple.rawValue)
        buffer.writeInteger(UInt16(token.count))
        buffer.writeBytes(token)
        buffer.writeInteger(UInt16(payload.count))
        buffer.writeBytes(payload)
    }

    /// Appends a command 1 (enhanced) notification.
    package static func writeEnhanced(into buffer: inout ByteBuffer, token: [UInt8], payload: [UInt8], identifier: UInt32, expiry: UInt32) {
        buffer.writeInteger(BinaryNotification.Format.enhanced.rawValue)
        buffer.writeInteger(identifier)
        buffer.writeInteger(expiry)
        buffer.writeInteger(UInt16(token.count))
        buffer.writeBytes(token)
        buffer.writeInteger(UInt16(payload.count))
        buffer.writeBytes(payload)
    }
}
