import Hummingbird
import Logging
import NIOCore
import Observability
import PostgresNIO
import Settings
import Storage
import Support

/// Builds the API server from a configuration, so tests can run exactly what `pushchat-api serve` runs.
public enum APIApplication {
    public static func build(
        configuration: Configuration,
        logger: Logger,
        databaseTimeout: Duration = .seconds(10),
        metrics: MetricsRegistry = MetricsRegistry(),
        onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let postgres = Database.makeClient(url: configuration.databaseURL, applicationName: "pushchat-api", logger: logger)
        let router = Router(context: APIRequestContext.self)
        router.add(middleware: AccessLogMiddleware())
        let controller = APIController(
            store: ChatStore(client: postgres, logger: logger),
            mode: configuration.mode,
            limits: configuration.limits,
            perIP: RateLimiter(rate: configuration.limits.ratePerIP, burst: configuration.limits.burstPerIP),
            perUDID: RateLimiter(rate: configuration.limits.ratePerUDID, burst: configuration.limits.burstPerUDID),
            databaseTimeout: databaseTimeout,
            metrics: APIMetrics(registry: metrics),
            logger: logger
        )
        controller.addRoutes(to: router)
        TestPages.addRoutes(to: router, mode: configuration.mode)
        return Application(
            router: router,
            // HTTP/1.0 requests without keep-alive get their answer and the connection closed, as the tutorial's server did.
            server: .http1(configuration: .init(additionalChannelHandlers: [HTTP10ConnectionInstaller()])),
            configuration: .init(
                address: .hostname(configuration.apiHost, port: configuration.apiPort),
                serverName: "PushChat"
            ),
            services: [postgres],
            onServerRunning: onServerRunning,
            logger: logger
        )
    }
}
