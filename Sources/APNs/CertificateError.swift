import Foundation
import NIOSSL
import Settings
import Support

/// A certificate or key that cannot be used. The description names the file, never the passphrase.
public struct CertificateError: PushChatError, Equatable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public static let unreadableFile = Code("unreadableFile")
        public static let noCertificate = Code("noCertificate")
        public static let noPrivateKey = Code("noPrivateKey")
        public static let passphraseRequired = Code("passphraseRequired")
        public static let wrongPassphrase = Code("wrongPassphrase")
        public static let invalidTLSSetup = Code("invalidTLSSetup")
        public var description: String { name }
    }

    public let code: Code
    public let path: String
    public let reason: String

    public init(code: Code, path: String, reason: String) {
        self.code = code
        self.path = path
        self.reason = reason
    }

    public var description: String { "certificate error: \(path): \(reason)" }
    public var exitStatus: Int32 { 78 }
}
