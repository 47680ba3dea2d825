package import NIOCore
import Settings
import Support

/// The gateway's only answer: `8 | status | identifier`, written just before it closes the connection.
package struct BinaryErrorResponse: Sendable, Equatable, CustomStringConvertible {
    /// The status byte (PROTOCOL.md).
    package struct Status: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        package let rawValue: UInt8
        package init(rawValue: UInt8) { self.rawValue = rawValue }

        package static let noErrors = Status(rawValue: 0)
        package static let processingError = Status(rawValue: 1)
        package static let missingDeviceToken = Status(rawValue: 2)
        package static let missingTopic = Status(rawValue: 3)
        package static let missingPayload = Status(rawValue: 4)
        package static let invalidTokenSize = Status(rawValue: 5)
        package static let invalidTopicSize = Status(rawValue: 6)
        package static let invalidPayloadSize = Status(rawValue: 7)
        package static let invalidToken = Status(rawValue: 8)
        package static let shutdown = Status(rawValue: 10)
        package static let unknown = Status(rawValue: 255)

        /// Apple's name for the status (`invalid token`).
        package var name: String {
            let names: [UInt8: String] = [
                0: "no errors", 1: "processing error", 2: "missing device token", 3: "missing topic", 4: "missing payload",
                5: "invalid token size", 6: "invalid topic size", 7: "invalid payload size", 8: "invalid token", 10: "shutdown",
                255: "unknown",
            ]
            return names[rawValue] ?? "undocumented"
        }

        package var description: String { "\(rawValue) (\(name))" }
    }

    package static let command: UInt8 = 8
    package static let size = 6

    package var status: Status
    package var identifier: UInt32

    package init(status: Status, identifier: UInt32) {
        self.status = status
        self.identifier = identifier
    }

    package var description: String { "status \(status) for identifier \(identifier)" }

    package func write(into buffer: inout ByteBuffer) {
        buffer.writeInteger(Self.command)
        buffer.writeInteger(status.rawValue)
        buffer.writeInteger(identifier)
    }

    /// Reads a response once all six bytes are there; `nil` while incomplete. Throws on a wrong command byte.
    package static func read(from buffer: inout ByteBuffer) throws(BinaryDecodingError) -> BinaryErrorResponse? {
        guard buffer.readableBytes >= size else { return nil }
        guard let command = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self), command == Self.command else {
            throw BinaryDecodingError(status: .processingError, identifier: 0, reason: "not an error response")
        }
        buffer.moveReaderIndex(forwardBy: 1)
        let status = buffer.readInteger(as: UInt8.self)!
        let identifier = buffer.readInteger(as: UInt32.self)!
        return BinaryErrorResponse(status: Status(rawValue: status), identifier: identifier)
    }
}
