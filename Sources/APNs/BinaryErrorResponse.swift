import NIOCore
import Settings
import Support

/// The gateway's only answer: `8 | status | identifier`, written just before it closes the connection.
public struct BinaryErrorResponse: Sendable, Equatable, CustomStringConvertible {
    /// The status byte (PROTOCOL.md).
    public struct Status: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        public static let noErrors = Status(rawValue: 0)
        public static let processingError = Status(rawValue: 1)
        public static let missingDeviceToken = Status(rawValue: 2)
        public static let missingTopic = Status(rawValue: 3)
        public static let missingPayload = Status(rawValue: 4)
        public static let invalidTokenSize = Status(rawValue: 5)
        public static let invalidTopicSize = Status(rawValue: 6)
        public static let invalidPayloadSize = Status(rawValue: 7)
        public static let invalidToken = Status(rawValue: 8)
        public static let shutdown = Status(rawValue: 10)
        public static let unknown = Status(rawValue: 255)

        /// Apple's name for the status (`invalid token`).
        public var name: String {
            let names: [UInt8: String] = [
                0: "no errors", 1: "processing error", 2: "missing device token", 3: "missing topic", 4: "missing payload",
                5: "invalid token size", 6: "invalid topic size", 7: "invalid payload size", 8: "invalid token", 10: "shutdown",
                255: "unknown",
            ]
            return names[rawValue] ?? "undocumented"
        }

        public var description: String { "\(rawValue) (\(name))" }
    }

    public static let command: UInt8 = 8
    public static let size = 6

    public var status: Status
    public var identifier: UInt32

    public init(status: Status, identifier: UInt32) {
        self.status = status
        self.identifier = identifier
    }

    public var description: String { "status \(status) for identifier \(identifier)" }

    public func write(into buffer: inout ByteBuffer) {
        buffer.writeInteger(Self.command)
        buffer.writeInteger(status.rawValue)
        buffer.writeInteger(identifier)
    }

    /// Reads a response once all six bytes are there; `nil` while incomplete. Throws on a wrong command byte.
    public static func read(from buffer: inout ByteBuffer) throws(BinaryDecodingError) -> BinaryErrorResponse? {
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
