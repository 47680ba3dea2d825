package import NIOCore

/// One notification in Apple's legacy binary format (commands 0, 1 and 2; see PROTOCOL.md).
///
/// `token` and `payload` are views into the buffer the frame was decoded from (no copy per frame).
package struct BinaryNotification: Sendable, Equatable {
    /// The command byte the notification arrived in, which sets its payload limit.
    package enum Format: UInt8, Sendable {
        case simple = 0
        case enhanced = 1
        case frame = 2

        /// Largest payload the format allows.
        package var payloadLimit: Int { self == .frame ? 2048 : 256 }
        package var name: String {
            switch self {
            case .simple: "simple"
            case .enhanced: "enhanced"
            case .frame: "frame"
            }
        }
    }

    package var format: Format
    /// The notification identifier (0 for the simple format, which has none).
    package var identifier: UInt32
    /// Epoch seconds until which APNs should keep trying; 0 = deliver once. Not present in the simple format.
    package var expiry: UInt32
    /// 10 = now, 5 = power-considerate; only the frame format carries it (10 otherwise).
    package var priority: UInt8
    package var token: ByteBuffer
    package var payload: ByteBuffer

    package init(format: Format, identifier: UInt32, expiry: UInt32, priority: UInt8, token: ByteBuffer, payload: ByteBuffer) {
        self.format = format
        self.identifier = identifier
        self.expiry = expiry
        self.priority = priority
        self.token = token
        self.payload = payload
    }
}
