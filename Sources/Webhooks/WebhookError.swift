package import Support

/// A webhook setting or value that cannot be used: a secret that is not `whsec_` and base64, a URL that is not https
/// or points inside the network. The description never holds a secret.
package struct WebhookError: PushChatError, Equatable {
    package typealias Code = ErrorCode<WebhookError>

    package let code: Code
    package let reason: String

    package init(code: Code, reason: String) {
        self.code = code
        self.reason = reason
    }

    package var description: String { reason }
}

extension ErrorCode where Domain == WebhookError {
    package static let badSecret = Self("badSecret")
    package static let badURL = Self("badURL")
    /// The URL's host is or resolves to an address inside the network, and is not listed in `webhook_private_hosts`.
    package static let insideNetwork = Self("insideNetwork")
    package static let badEvents = Self("badEvents")
}
