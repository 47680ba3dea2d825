/// A setting that is missing, malformed or unreadable. Its description is one line that names the key (or file)
/// and never repeats a secret value.
package struct ConfigurationError: PushChatError, Equatable {
    /// What went wrong.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String { case missingValue, invalidValue, unreadableFile, malformedFile, unknownKey }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A required setting has no value in the file or the environment.
        package static let missingValue = Code(.missingValue)
        /// A setting's value cannot be parsed.
        package static let invalidValue = Code(.invalidValue)
        /// The configuration file cannot be read.
        package static let unreadableFile = Code(.unreadableFile)
        /// The configuration file is not the expected JSON shape.
        package static let malformedFile = Code(.malformedFile)
        /// The configuration file names a key that no PushChat process knows (most likely a typo).
        package static let unknownKey = Code(.unknownKey)

        package var description: String { base.rawValue }
    }

    package let code: Code
    /// The setting (environment-variable name) or file the error is about.
    package let key: String
    /// A human-readable reason, free of secret values.
    package let reason: String

    package init(code: Code, key: String, reason: String) {
        self.code = code
        self.key = key
        self.reason = reason
    }

    package var description: String { "configuration error: \(key): \(reason)" }
    package var exitStatus: Int32 { 78 }
}
