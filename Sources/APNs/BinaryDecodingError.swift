import NIOCore
import Support

/// A frame the gateway refuses: the status and identifier of the error response it answers with.
package struct BinaryDecodingError: PushChatError, Equatable {
    /// The code is the status the gateway answers with.
    package var code: BinaryErrorResponse.Status { status }
    package let status: BinaryErrorResponse.Status
    /// The notification's identifier when it could be read, else 0.
    package let identifier: UInt32
    package let reason: String

    package init(status: BinaryErrorResponse.Status, identifier: UInt32, reason: String) {
        self.status = status
        self.identifier = identifier
        self.reason = reason
    }

    package var description: String { "\(reason) (status \(status), identifier \(identifier))" }
}
