package import Support

/// A service-account file the FCM sender cannot use. The description names the setting, the file and the field, never
/// the private key.
package struct ServiceAccountError: PushChatError, Equatable {
    package typealias Code = ErrorCode<ServiceAccountError>

    package let code: Code
    /// The file's path.
    package let path: String
    package let reason: String

    package init(code: Code, path: String, reason: String) {
        self.code = code
        self.path = path
        self.reason = reason
    }

    package var description: String { "fcm_service_account_file: \(path): \(reason)" }
    /// A file no restart can fix.
    package var exitStatus: Int32 { 78 }
}

extension ErrorCode where Domain == ServiceAccountError {
    package static let unreadableFile = Self("unreadableFile")
    package static let notJSON = Self("notJSON")
    package static let badField = Self("badField")
    package static let badPrivateKey = Self("badPrivateKey")
}
