import Foundation
import NIOCore
import Settings
import Support

/// Why a row can never be sent (it is failed at once, not retried).
public struct UnsendableReason: PushChatError, Equatable {
    public typealias Code = ErrorCode<UnsendableReason>
    public var code: Code { .unsendable }
    public var reason: String { description }
    public let description: String
}

extension ErrorCode where Domain == UnsendableReason {
    public static let unsendable = Self("unsendable")
}
