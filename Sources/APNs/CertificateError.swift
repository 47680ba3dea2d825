import Foundation
import NIOSSL
import Support

/// A certificate or key that cannot be used. The description names the file, never the passphrase.
package struct CertificateError: PushChatError, Equatable {
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        package static let unreadableFile = Code("unreadableFile")
        package static let noCertificate = Code("noCertificate")
        package static let noPrivateKey = Code("noPrivateKey")
        package static let passphraseRequired = Code("passphraseRequired")
        package static let wrongPassphrase = Code("wrongPassphrase")
        package static let invalidTLSSetup = Code("invalidTLSSetup")
        package var description: String { name }
    }

    package let code: Code
    package let path: String
    package let reason: String

    package init(code: Code, path: String, reason: String) {
        self.code = code
        self.path = path
        self.reason = reason
    }

    package var description: String { "certificate error: \(path): \(reason)" }
    package var exitStatus: Int32 { 78 }
}
