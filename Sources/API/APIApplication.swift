package import Hummingbird
import HummingbirdCore
import HummingbirdTLS
package import Logging
package import NIOCore
import NIOSSL
package import Observability
import PostgresNIO
package import Settings
import Storage
package import Support
import WebPush

/// Builds the API server from a configuration, so tests can run exactly what `pushchat-api serve` runs.
package enum APIApplication {
    /// - Parameter databaseTimeout: how long a request may wait for a pooled connection (nothing has reached the server
    ///   yet) before it is answered 503; once its statement is sent, the server's `statement_timeout` decides.
    package static func build(
        configuration: Configuration,
        logger: Logger,
        databaseTimeout: Duration = .seconds(10),
        metrics: MetricsRegistry = MetricsRegistry(),
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in },
        onMetricsRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
    ) throws(ConfigurationError) -> some ApplicationProtocol {
        let database = DatabaseClient(
            url: configuration.databaseURL,
            applicationName: "pushchat-api",
            leaseTimeout: databaseTimeout,
            logger: logger
        )
        let resolver = ClientAddressResolver(
            trustedProxies: configuration.limits.trustedProxies,
            ipv6Prefix: configuration.limits.ipv6Prefix
        )
        let perIP = RateLimiter(rate: configuration.limits.ratePerIP, burst: configuration.limits.burstPerIP)
        let counter = ConnectionCounter(
            maximum: configuration.limits.maxConnectionsPerIP,
            maximumTotal: configuration.limits.maxConnections,
            gauge: metrics.meter("pushchat.api.connections")
        )
        let router = Router(context: APIRequestContext.self)
        router.add(middleware: AccessLogMiddleware())
        router.add(middleware: ClientAddressMiddleware(resolver: resolver))
        let apiMetrics = APIMetrics(registry: metrics)
        apiMetrics.watchDatabase(database.health)
        let controller = APIController(
            store: ChatStore(database: database, logger: logger, app: configuration.chatApp),
            mode: configuration.mode,
            limits: configuration.limits,
            perIP: perIP,
            perUDID: RateLimiter(rate: configuration.limits.ratePerUDID, burst: configuration.limits.burstPerUDID),
            fanOut: FanOutBudget(limits: configuration.limits),
            resolver: resolver,
            health: database.health,
            metrics: apiMetrics,
            logger: logger,
            webPushPrivateHosts: configuration.webPush.privateHosts
        )
        controller.addRoutes(to: router)
        ProviderController(
            store: ProviderStore(database: database, logger: logger, chatApp: configuration.chatApp),
            transport: configuration.apns.transport,
            appTopic: configuration.apns.topic,
            limits: configuration.limits,
            perIP: perIP,
            failedAuth: RateLimiter(rate: configuration.limits.ratePerIP / 4, burst: configuration.limits.burstPerIP / 4),
            metrics: apiMetrics,
            logger: logger,
            vapidPublicKey: try vapidPublicKey(configuration),
            webPushPrivateHosts: configuration.webPush.privateHosts
        ).addRoutes(to: router)
        if configuration.exposure.testPages {
            // Not on the open internet unless asked for (`api_test_pages`): they fill rooms and probe the database.
            controller.addTestRoutes(to: router)
            TestPages.addRoutes(to: router, mode: configuration.mode)
        }
        let metricsListener = MetricsListener(
            host: configuration.exposure.metricsHost,
            port: configuration.exposure.metricsPort,
            registry: metrics,
            logger: logger,
            onRunning: onMetricsRunning
        )
        return Application(
            router: router,
            // HTTP/1.0 requests without keep-alive get their answer and the connection closed, as the tutorial's server did.
            server: try server(configuration, counter: counter, resolver: resolver, logger: logger),
            configuration: .init(
                address: .hostname(configuration.apiHost, port: configuration.apiPort),
                serverName: "PushChat"
            ),
            services: [database, metricsListener],
            onServerRunning: onServerRunning,
            logger: logger
        )
    }

    /// `webpush_public_key` (checked: a point on P-256), else the public half of `webpush_vapid_key_file`'s key; one
    /// that is not a P-256 key stops the API at start.
    static func vapidPublicKey(_ configuration: Configuration) throws(ConfigurationError) -> String? {
        if let key = configuration.webPush.publicKey {
            do {
                _ = try WebPushSubscription.userAgentKey(key)
            } catch {
                throw ConfigurationError(code: .invalidValue, key: ConfigurationKey.webPushPublicKey.rawValue, reason: error.reason)
            }
            return key
        }
        guard let file = configuration.webPush.vapidKeyFile else { return nil }
        do {
            return try VAPIDKey(file: file).publicKey
        } catch {
            throw ConfigurationError(code: .invalidValue, key: ConfigurationKey.webPushVAPIDKeyFile.rawValue, reason: error.reason)
        }
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// TLS 1.2's forward-secret AEAD suites (TLS 1.3 has only AEAD suites): no RSA key exchange, no CBC, as
    /// Mozilla's "intermediate" profile.
    static let aeadCipherSuites: [NIOTLSCipher] = [
        .TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, .TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        .TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, .TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        .TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, .TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ]

    /// HTTP/1 with each connection guarded (the per-address cap, the header, body and idle timeouts), over TLS when
    /// `api_tls_certificate` and `api_tls_key` are set.
    static func server(
        _ configuration: Configuration,
        counter: ConnectionCounter,
        resolver: ClientAddressResolver,
        logger: Logger
    ) throws(ConfigurationError) -> HTTPServerBuilder {
        let limits = configuration.limits
        let http1 = HTTPServerBuilder.http1(
            configuration: .init(additionalChannelHandlers: [
                HTTPConnectionInstaller(guardian: ConnectionGuard(limits: limits, counter: counter, resolver: resolver, logger: logger))
            ])
        )
        guard let certificate = configuration.exposure.tlsCertificate, let key = configuration.exposure.tlsKey else {
            if configuration.mode == .production && !Self.isLoopback(configuration.apiHost) {
                logger.warning(
                    "Plain HTTP on \(configuration.apiHost):\(configuration.apiPort) in production: the udid and room code travel readable; set api_tls_certificate/api_tls_key or listen on 127.0.0.1 behind a TLS proxy"
                )
            }
            return http1
        }
        var tls: TLSConfiguration
        do {
            tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
            )
            tls.minimumTLSVersion = .tlsv12
            tls.cipherSuiteValues = Self.aeadCipherSuites
        } catch {
            throw ConfigurationError(
                code: .unreadableFile,
                key: ConfigurationKey.apiTLSCertificate.environmentName,
                reason: "cannot use \(certificate) with \(key) (PEM certificate chain and private key): \(error)"
            )
        }
        do {
            return try .tls(http1, tlsConfiguration: tls)
        } catch {
            throw ConfigurationError(code: .invalidValue, key: ConfigurationKey.apiTLSCertificate.environmentName, reason: "\(error)")
        }
    }
}
