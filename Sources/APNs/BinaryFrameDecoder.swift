package import NIOCore
import Settings
import Support

/// Decodes binary notifications (commands 0, 1, 2) from a stream, checking every length as Apple does.
///
/// `decode` returns `nil` until a whole notification is buffered, and rejects a bad length as soon as it is read,
/// so a garbage length never makes the caller buffer megabytes.
package enum BinaryFrameDecoder {
    /// The longest valid command 2 frame body: a maximal payload and every item.
    package static let maximumFrameLength = BinaryFrame.frameSize(payloadLength: BinaryNotification.Format.frame.payloadLimit) - 5

    package static func decode(_ buffer: inout ByteBuffer) throws(BinaryDecodingError) -> BinaryNotification? {
        guard let command = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return nil }
        switch command {
        case BinaryNotification.Format.simple.rawValue:
            return try decodeSimple(&buffer)
        case BinaryNotification.Format.enhanced.rawValue:
            return try decodeEnhanced(&buffer)
        case BinaryNotification.Format.frame.rawValue:
            return try decodeFrame(&buffer)
        default:
            throw BinaryDecodingError(status: .processingError, identifier: 0, reason: "unknown command \(command)")
        }
    }

    /// `0 | token length | token | payload length | payload`
    static func decodeSimple(_ buffer: inout ByteBuffer) throws(BinaryDecodingError) -> BinaryNotification? {
        try decodeTokenAndPayload(&buffer, format: .simple, headerLength: 1, identifier: 0, expiry: 0)
    }

    /// `1 | identifier | expiry | token length | token | payload length | payload`
    static func decodeEnhanced(_ buffer: inout ByteBuffer) throws(BinaryDecodingError) -> BinaryNotification? {
        let start = buffer.readerIndex
        guard let identifier = buffer.getInteger(at: start + 1, as: UInt32.self),
            let expiry = buffer.getInteger(at: start + 5, as: UInt32.self)
        else { return nil }
        return try decodeTokenAndPayload(&buffer, format: .enhanced, headerLength: 9, identifier: identifier, expiry: expiry)
    }

    private static func decodeTokenAndPayload(
        _ buffer: inout ByteBuffer,
        format: BinaryNotification.Format,
        headerLength: Int,
        identifier: UInt32,
        expiry: UInt32
    ) throws(BinaryDecodingError) -> BinaryNotification? {
        let start = buffer.readerIndex
        guard let tokenLength = buffer.getInteger(at: start + headerLength, as: UInt16.self) else { return nil }
        try checkToken(length: Int(tokenLength), identifier: identifier)
        let payloadLengthAt = start + headerLength + 2 + Int(tokenLength)
        guard let payloadLength = buffer.getInteger(at: payloadLengthAt, as: UInt16.self) else { return nil }
        try checkPayload(length: Int(payloadLength), format: format, identifier: identifier)
        let total = payloadLengthAt + 2 + Int(payloadLength) - start
        guard buffer.readableBytes >= total else { return nil }
        let token = buffer.getSlice(at: start + headerLength + 2, length: Int(tokenLength))!
        let payload = buffer.getSlice(at: payloadLengthAt + 2, length: Int(payloadLength))!
        buffer.moveReaderIndex(forwardBy: total)
        return BinaryNotification(format: format, identifier: identifier, expiry: expiry, priority: 10, token: token, payload: payload)
    }

    /// `2 | frame length | items…`, each item `id | length | data`.
    static func decodeFrame(_ buffer: inout ByteBuffer) throws(BinaryDecodingError) -> BinaryNotification? {
        let start = buffer.readerIndex
        guard let frameLength = buffer.getInteger(at: start + 1, as: UInt32.self) else { return nil }
        guard frameLength <= maximumFrameLength else {
            throw BinaryDecodingError(status: .invalidPayloadSize, identifier: 0, reason: "frame of \(frameLength) bytes is too long")
        }
        guard buffer.readableBytes >= 5 + Int(frameLength) else { return nil }
        var items = FrameItems()
        var position = start + 5
        let end = position + Int(frameLength)
        while position < end {
            guard end - position >= 3, let item = buffer.getInteger(at: position, as: UInt8.self),
                let length = buffer.getInteger(at: position + 1, as: UInt16.self), end - position - 3 >= Int(length)
            else {
                throw BinaryDecodingError(status: .processingError, identifier: items.identifier, reason: "item overruns the frame")
            }
            let data = position + 3
            switch item {
            case BinaryFrame.tokenItem:
                items.token = buffer.getSlice(at: data, length: Int(length))
            case BinaryFrame.payloadItem:
                items.payload = buffer.getSlice(at: data, length: Int(length))
            case BinaryFrame.identifierItem where length == 4:
                items.identifier = buffer.getInteger(at: data, as: UInt32.self)!
            case BinaryFrame.expiryItem where length == 4:
                items.expiry = buffer.getInteger(at: data, as: UInt32.self)!
            case BinaryFrame.priorityItem where length == 1:
                items.priority = buffer.getInteger(at: data, as: UInt8.self)!
            default:
                items.malformedItem = items.malformedItem ?? "item \(item) of length \(length) is not valid"
            }
            position = data + Int(length)
        }
        if let malformed = items.malformedItem {
            throw BinaryDecodingError(status: .processingError, identifier: items.identifier, reason: malformed)
        }
        guard let token = items.token else {
            throw BinaryDecodingError(status: .missingDeviceToken, identifier: items.identifier, reason: "frame has no device token")
        }
        try checkToken(length: token.readableBytes, identifier: items.identifier)
        guard let payload = items.payload else {
            throw BinaryDecodingError(status: .missingPayload, identifier: items.identifier, reason: "frame has no payload")
        }
        try checkPayload(length: payload.readableBytes, format: .frame, identifier: items.identifier)
        guard items.priority == 10 || items.priority == 5 else {
            throw BinaryDecodingError(
                status: .processingError,
                identifier: items.identifier,
                reason: "priority \(items.priority) is not 5 or 10"
            )
        }
        buffer.moveReaderIndex(forwardBy: 5 + Int(frameLength))
        return BinaryNotification(
            format: .frame,
            identifier: items.identifier,
            expiry: items.expiry,
            priority: items.priority,
            token: token,
            payload: payload
        )
    }

    private struct FrameItems {
        var token: ByteBuffer?
        var payload: ByteBuffer?
        var identifier: UInt32 = 0
        var expiry: UInt32 = 0
        var priority: UInt8 = 10
        var malformedItem: String?
    }

    private static func checkToken(length: Int, identifier: UInt32) throws(BinaryDecodingError) {
        if length == 0 {
            throw BinaryDecodingError(status: .missingDeviceToken, identifier: identifier, reason: "empty device token")
        }
        guard length == DeviceToken.binaryLength else {
            throw BinaryDecodingError(status: .invalidTokenSize, identifier: identifier, reason: "device token of \(length) bytes")
        }
    }

    private static func checkPayload(length: Int, format: BinaryNotification.Format, identifier: UInt32) throws(BinaryDecodingError) {
        if length == 0 {
            throw BinaryDecodingError(status: .missingPayload, identifier: identifier, reason: "empty payload")
        }
        guard length <= format.payloadLimit else {
            throw BinaryDecodingError(
                status: .invalidPayloadSize,
                identifier: identifier,
                reason: "payload of \(length) bytes exceeds \(format.payloadLimit)"
            )
        }
    }
}
