import HTTPServing
import Hummingbird
import Logging
import Observability
import ServiceLifecycle

/// The API's `/metrics`, on a listener of its own (`api_metrics_host`:`api_metrics_port`, loopback by default), never on
/// the public port. A listener that cannot start is logged and the API keeps serving: metrics must not take it down.
struct MetricsListener: Service {
    let host: String
    let port: Int
    let registry: MetricsRegistry
    let logger: Logger
    let onRunning: @Sendable (Int) async -> Void

    func run() async throws {
        let router = Router()
        let registry = self.registry
        router.get("/metrics") { _, _ in Response.metrics(registry) }
        var quiet = logger
        quiet.logLevel = .critical  // Hummingbird's own lines stay out of the log; a failed bind is reported below
        let onRunning = self.onRunning
        let application = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "pushchat-api-metrics"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? 0) },
            logger: quiet
        )
        do {
            try await application.run()
        } catch {
            logger.error("The metrics listener on \(host):\(port) failed: \(error); /metrics is unavailable")
            try? await gracefulShutdown()
        }
    }
}
