/// A setting that is missing, malformed or unreadable. Its description is one line that names the key (or file)
/// and never repeats a secret value.
public struct ConfigurationError: PushChatError, Equatable {
    /// What went wrong.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String { case missingValue, invalidValue, unreadableFile, malformedFile, unknownKey }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A required setting has no value in the file or the environment.
        public static let missingValue = Code(.missingValue)
        /// A setting's value cannot be parsed.
        public static let invalidValue = Code(.invalidValue)
        /// The configuration file cannot be read.
        public static let unreadableFile = Code(.unreadableFile)
        /// The configuration file is not the expected JSON shape.
        public static let malformedFile = Code(.malformedFile)
        /// The configuration file names a key that no PushChat process knows (most likely a typo).
        public static let unknownKey = Code(.unknownKey)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// The setting (environment-variable name) or file the error is about.
    public let key: String
    /// A human-readable reason, free of secret values.
    public let reason: String

    public init(code: Code, key: String, reason: String) {
        self.code = code
        self.key = key
        self.reason = reason
    }

    public var description: String { "configuration error: \(key): \(reason)" }
    public var exitStatus: Int32 { 78 }
}
