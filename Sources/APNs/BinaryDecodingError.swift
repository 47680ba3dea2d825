import NIOCore
import Settings
import Support

/// A frame the gateway refuses: the status and identifier of the error response it answers with.
public struct BinaryDecodingError: PushChatError, Equatable {
    /// The code is the status the gateway answers with.
    public var code: BinaryErrorResponse.Status { status }
    public let status: BinaryErrorResponse.Status
    /// The notification's identifier when it could be read, else 0.
    public let identifier: UInt32
    public let reason: String

    public init(status: BinaryErrorResponse.Status, identifier: UInt32, reason: String) {
        self.status = status
        self.identifier = identifier
        self.reason = reason
    }

    public var description: String { "\(reason) (status \(status), identifier \(identifier))" }
}
