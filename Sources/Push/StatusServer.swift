import Hummingbird
import Logging
import NIOCore
import PostgresNIO
import Shared

/// The daemon's small HTTP listener (loopback by default): `/healthz` (the process is alive), `/readyz` (the
/// database answers and at least one gateway connection is up) and `/metrics` (Prometheus text).
enum StatusServer {
    static func build(
        settings: PushSettings,
        client: PostgresClient,
        status: PushStatus,
        metrics: PushMetrics,
        logger: Logger,
        onRunning: @escaping @Sendable (Int) async -> Void
    ) -> some ApplicationProtocol {
        let router = Router()
        router.get("/healthz") { _, _ in plain(.ok, "ok") }
        router.get("/readyz") { _, _ in await readiness(client: client, status: status, logger: logger) }
        router.get("/metrics") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: MetricsRegistry.contentType],
                body: .init(byteBuffer: ByteBuffer(bytes: metrics.registry.exposition()))
            )
        }
        var serverLogger = logger
        serverLogger.logLevel = .critical  // Hummingbird's own lines stay out of the log; a failed bind is reported below
        return Application(
            router: router,
            configuration: .init(address: .hostname(settings.statusHost, port: settings.statusPort), serverName: "pushchat-push"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? 0) },
            logger: serverLogger
        )
    }

    static func readiness(client: PostgresClient, status: PushStatus, logger: Logger) async -> Response {
        do {
            try await withDeadline(.seconds(2)) {
                _ = try await client.query("SELECT 1", logger: logger).collect()
            }
        } catch {
            return plain(.serviceUnavailable, "database unreachable")
        }
        guard status.connectedCount > 0 else { return plain(.serviceUnavailable, "not connected to the gateway") }
        return plain(.ok, "ready")
    }

    static func plain(_ status: HTTPResponse.Status, _ text: String) -> Response {
        Response(
            status: status,
            headers: [.contentType: "text/plain; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: text + "\n"))
        )
    }
}
