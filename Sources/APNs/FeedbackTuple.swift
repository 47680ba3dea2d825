package import NIOCore
import Settings
import Support

/// One record of the binary feedback service: `timestamp u32 | token length u16 | token`.
/// The timestamp (epoch seconds) is when APNs found the app gone from the device.
package struct FeedbackTuple: Sendable, Equatable {
    package var timestamp: UInt32
    package var token: [UInt8]

    /// Real tokens are 32 bytes; anything past this is garbage, not a token.
    package static let maximumTokenLength = 100

    package init(timestamp: UInt32, token: [UInt8]) {
        self.timestamp = timestamp
        self.token = token
    }

    package var tokenHex: String { DeviceToken.hex(token) }

    package func write(into buffer: inout ByteBuffer) {
        buffer.writeInteger(timestamp)
        buffer.writeInteger(UInt16(token.count))
        buffer.writeBytes(token)
    }

    /// Reads the next whole tuple; `nil` while incomplete. Throws when the length cannot be a token's.
    package static func read(from buffer: inout ByteBuffer) throws(FeedbackDecodingError) -> FeedbackTuple? {
        let start = buffer.readerIndex
        guard let timestamp = buffer.getInteger(at: start, as: UInt32.self),
            let length = buffer.getInteger(at: start + 4, as: UInt16.self)
        else { return nil }
        guard length > 0, Int(length) <= maximumTokenLength else {
            throw FeedbackDecodingError(reason: "tuple with a token length of \(length) bytes", offset: start)
        }
        guard let token = buffer.getBytes(at: start + 6, length: Int(length)) else { return nil }
        buffer.moveReaderIndex(forwardBy: 6 + Int(length))
        return FeedbackTuple(timestamp: timestamp, token: token)
    }
}
