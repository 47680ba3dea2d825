import APNsTransport
import AsyncHTTPClient
import CoreMetrics
package import FCM
import HTTP2Client
import Logging
package import NIOCore
import NIOPosix
import NIOSSL
package import Settings
import Storage

/// What the daemon needs to send an app's Android notifications, loaded and checked once: the service account (a bad
/// file stops the process at start, exit 78, with one line naming `fcm_service_account_file`), and TLS to FCM and the
/// token URI (with `fcm_ca_file`'s roots).
package struct FCMTransport: Sendable {
    let connector: HTTP2Connector
    package let account: ServiceAccount
    let tls: TLSConfiguration

    /// The transport `configuration.fcm` names for the default app; nil without a service-account file.
    package static func load(
        _ configuration: Configuration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws -> Self? {
        guard let file = configuration.fcm.serviceAccountFile else { return nil }
        return try load(serviceAccountFile: file, configuration: configuration, group: group)
    }

    /// The transport for the service account in `serviceAccountFile` (an app's).
    package static func load(
        serviceAccountFile file: String,
        configuration: Configuration,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws -> Self {
        let account = try ServiceAccount(file: file)
        let caFile = configuration.fcm.caFile
        let context = try GatewayTLS.clientContext(identity: nil, caFile: caFile, alpn: ["h2"])
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if let caFile { tls.additionalTrustRoots = [.file(caFile)] }
        let connector = HTTP2Connector(
            endpoint: configuration.fcm.host,
            tls: context,
            group: group,
            requestTimeout: configuration.push.requestTimeout
        )
        return FCMTransport(connector: connector, account: account, tls: tls)
    }

    /// `FCM to fcm.googleapis.com:443 (project P)`, for the start-up line.
    package var description: String { "FCM to \(connector.endpoint) (project \(account.projectID))" }

    /// A client for the token URI, which the caller shuts down.
    func makeTokenClient() -> HTTPClient {
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.timeout = .init(connect: .seconds(10), read: .seconds(10))
        // The assertion goes to the service account's token URI and nowhere else.
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
    }
}

/// FCM in the registry, for an app whose configuration names a service account.
extension FCMTransport: DestinationSource {
    var platform: Platform { .fcm }

    /// As APNs: chat and single notifications on a connection kept open, a broadcast's on connections opened while it
    /// drains, so an Android chat message never waits behind a broadcast's rows or for a connection to open.
    var defaultAppLanes: [SenderLane] { [.interactive, .bulk] }

    /// Every connection of the app's lanes uses one access token, fetched with a client of their own, shut down after.
    func withDestination(context: WorkerContext, logger: Logger, _ body: (any Destination) async -> Void) async {
        let client = makeTokenClient()
        let failures = context.metrics.fcmTokenFailures(app: context.rows.app)
        failures.increment(by: 0)  // the series exists at 0 before a failure: increase() sees the first one
        let tokens = AccessTokens(account: account, client: client, logger: logger) { failures.increment() }
        await body(FCMDestination(connector: connector, account: account, tokens: tokens, settings: context.settings))
        try? await client.shutdown()
    }
}
