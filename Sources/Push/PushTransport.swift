package import APNs
package import APNsTransport
package import HTTP2Client
import Logging
package import NIOCore
import NIOPosix
import NIOSSL
package import Settings

/// Which APNs interface the daemon speaks, decided once at start from the configuration, with everything it needs
/// loaded and checked: a missing key file, topic or certificate stops the process there (exit 78), never later.
package enum PushTransport: Sendable {
    /// The legacy binary interface: command 2 frames to the gateway with the client certificate.
    case binary(BinaryConnector, BinaryEncoder)
    /// The HTTP/2 provider API: a stream per notification, token or certificate authentication.
    case http2(HTTP2Connector, topic: String, tokens: ProviderTokenCache?)

    /// The transport `configuration.apns.transport` names: credentials read, the TLS context built once.
    package static func load(
        _ configuration: Configuration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws -> Self {
        let apns = configuration.apns
        let push = configuration.push
        switch apns.transport {
        case .binary:
            let connector = BinaryConnector(endpoint: apns.gateway, tls: try apns.clientTLSContext(), group: group)
            return .binary(connector, BinaryEncoder(expiry: push.expirySeconds, priority: push.priority))
        case .http2:
            let authentication = try apns.http2Authentication()
            let connector = HTTP2Connector(
                endpoint: apns.host,
                tls: try apns.http2TLSContext(authentication),
                group: group,
                requestTimeout: push.requestTimeout
            )
            var tokens: ProviderTokenCache?
            if case .token(let signer, _) = authentication { tokens = ProviderTokenCache(signer: signer) }
            return .http2(connector, topic: authentication.topic, tokens: tokens)
        }
    }

    /// `binary to gateway.push.apple.com:2195`, for the start-up line.
    package var description: String {
        switch self {
        case .binary(let connector, _): "binary to \(connector.endpoint)"
        case .http2(let connector, _, _): "HTTP/2 to \(connector.endpoint)"
        }
    }
}

/// APNs in the registry: the binary interface or HTTP/2, as `apns_transport` says.
extension PushTransport: DestinationSource {
    var platform: Platform { .apns }

    /// Chat and single notifications on connections of their own (the first always open: the guide's "Connection OK"
    /// at start), a broadcast's rows on others.
    var defaultAppLanes: [SenderLane] { [.interactive, .bulk] }

    func withDestination(context: WorkerContext, logger: Logger, _ body: (any Destination) async -> Void) async {
        switch self {
        case .binary(let connector, let encoder):
            await body(BinaryDestination(connector: connector, encoder: encoder, settings: context.settings))
        case .http2(let connector, let topic, let tokens):
            await body(HTTP2Destination(connector: connector, topic: topic, tokens: tokens, settings: context.settings))
        }
    }
}
