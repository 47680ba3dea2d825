import NIOCore
import Settings
package import Support

/// Bytes from the feedback service that are not tuples.
package struct FeedbackDecodingError: PushChatError, Equatable {
    package typealias Code = ErrorCode<FeedbackDecodingError>
    package var code: Code { .malformedTuple }
    package let reason: String
    package let offset: Int
    package var description: String { "malformed feedback data: \(reason)" }
}

extension ErrorCode where Domain == FeedbackDecodingError {
    package static let malformedTuple = Self("malformedTuple")
}
