import NIOCore
import Settings
import Support

/// Bytes from the feedback service that are not tuples.
public struct FeedbackDecodingError: PushChatError, Equatable {
    public typealias Code = ErrorCode<FeedbackDecodingError>
    public var code: Code { .malformedTuple }
    public let reason: String
    public let offset: Int
    public var description: String { "malformed feedback data: \(reason)" }
}

extension ErrorCode where Domain == FeedbackDecodingError {
    public static let malformedTuple = Self("malformedTuple")
}
