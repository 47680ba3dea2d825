import APNsTransport
import HTTP2Client
import Logging
package import NIOCore
import NIOPosix
import NIOSSL
package import Settings
import Storage
import Support
import WebPush

/// What the daemon needs to reach browsers, loaded and checked once: the VAPID key (a file that is not a P-256 key,
/// or no `webpush_subject` beside it, stops the process at start, exit 78) and TLS to push services (the system's
/// roots, with `webpush_ca_file`'s).
package struct WebPushTransport: Sendable {
    let connector: HTTP2Connector
    /// For push services that speak only HTTP/1.1: the same roots, and the event loops.
    let http1TLS: TLSConfiguration
    /// Which push services speak only HTTP/1.1, learnt once for all of this key's links.
    let http1Origins = HTTP1Origins()
    let group: any EventLoopGroup
    let key: VAPIDKey
    let subject: String
    let privateHosts: Set<String>
    let maxConnections: Int

    /// The transport `configuration.webPush` sets up for the default app; nil without a VAPID key file.
    package static func load(
        _ configuration: Configuration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws -> Self? {
        guard let file = configuration.webPush.vapidKeyFile else { return nil }
        return try load(keyFile: file, subject: configuration.webPush.subject, configuration: configuration, group: group)
    }

    /// The transport for the key in `keyFile` and `subject` (an app's, else the configuration's).
    package static func load(
        keyFile file: String,
        subject: String?,
        configuration: Configuration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws -> Self {
        let key: VAPIDKey
        do {
            key = try VAPIDKey(file: file)
        } catch {
            throw ConfigurationError(code: .invalidValue, key: ConfigurationKey.webPushVAPIDKeyFile.rawValue, reason: error.reason)
        }
        guard let subject else {
            throw ConfigurationError(
                code: .invalidValue,
                key: ConfigurationKey.webPushSubject.rawValue,
                reason: "a VAPID key needs a subject beside it (mailto:ADDRESS or an https: URL): push services refuse tokens without one"
            )
        }
        // HTTP/1.1 offered beside HTTP/2: a push service that speaks only HTTP/1.1 chooses it (rather than failing the
        // handshake), and the link goes on over HTTP/1.1 with it.
        let context = try GatewayTLS.clientContext(identity: nil, caFile: configuration.webPush.caFile, alpn: ["h2", "http/1.1"])
        var http1TLS = TLSConfiguration.makeClientConfiguration()
        http1TLS.minimumTLSVersion = .tlsv12
        if let caFile = configuration.webPush.caFile { http1TLS.additionalTrustRoots = [.file(caFile)] }
        // The endpoint is each row's; the connector's own is never connected to.
        let connector = HTTP2Connector(
            endpoint: Endpoint(host: "push-services", port: 443),
            tls: context,
            group: group,
            requestTimeout: configuration.push.requestTimeout
        )
        return WebPushTransport(
            connector: connector,
            http1TLS: http1TLS,
            group: group,
            key: key,
            subject: subject,
            privateHosts: configuration.webPush.privateHosts,
            maxConnections: configuration.webPush.maxConnections
        )
    }

    /// `Web Push (VAPID key B…)`, for the start-up line.
    package var description: String { "Web Push (VAPID key \(key.publicKey.prefix(12))…)" }
}

/// Browsers in the registry, for an app whose configuration names a VAPID key.
extension WebPushTransport: DestinationSource {
    var platform: Platform { .web }

    /// As the phones: chat and single notifications on a link kept open, a broadcast's on links opened while it drains.
    var defaultAppLanes: [SenderLane] { [.interactive, .bulk] }

    func withDestination(context: WorkerContext, logger: Logger, _ body: (any Destination) async -> Void) async {
        await body(
            WebPushDestination(
                connector: connector,
                http1TLS: http1TLS,
                http1Origins: http1Origins,
                group: group,
                subscriptions: WebSubscriptions(),
                vapid: VAPIDSigner(key: key, subject: subject),
                privateHosts: privateHosts,
                settings: context.settings,
                maxConnections: maxConnections,
                connections: context.metrics.webPushConnections(app: context.rows.app),
                logger: logger
            )
        )
    }
}
