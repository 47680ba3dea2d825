import Foundation
import NIOCore
import Settings
package import Support

/// Why a row can never be sent (it is failed at once, not retried).
package struct UnsendableReason: PushChatError, Equatable {
    package typealias Code = ErrorCode<UnsendableReason>
    package var code: Code { .unsendable }
    package var reason: String { description }
    package let description: String
}

extension ErrorCode where Domain == UnsendableReason {
    package static let unsendable = Self("unsendable")
}
