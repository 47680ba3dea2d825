package import APNs
import Settings
import Support

/// How the HTTP/2 client proves who it is.
package enum HTTP2Authentication: Sendable {
    case token(ProviderTokenSigner, topic: String)
    case certificate(ClientIdentity, topic: String)

    package var topic: String {
        switch self {
        case .token(_, let topic), .certificate(_, let topic): topic
        }
    }
}
