import APNs
import HTTPServing
import Hummingbird
import Logging
import NIOCore
import Observability
import Settings
import Storage
import Support

/// The daemon's small HTTP listener (loopback by default): `/healthz` (the process is alive), `/readyz` (the
/// database answers and at least one gateway connection is up) and `/metrics` (Prometheus text).
enum StatusServer {
    static func build(
        settings: PushSettings,
        health: DatabaseHealth,
        status: PushStatus,
        metrics: PushMetrics,
        logger: Logger,
        onRunning: @escaping @Sendable (Int) async -> Void
    ) -> some ApplicationProtocol {
        let router = Router()
        router.get("/healthz") { _, _ in Response.text(.ok, "ok") }
        router.get("/readyz") { _, _ in readiness(health: health, status: status) }
        router.get("/metrics") { _, _ in Response.metrics(metrics.registry) }
        var serverLogger = logger
        serverLogger.logLevel = .critical  // Hummingbird's own lines stay out of the log; a failed bind is reported below
        return Application(
            router: router,
            configuration: .init(address: .hostname(settings.statusHost, port: settings.statusPort), serverName: "pushchat-push"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? 0) },
            logger: serverLogger
        )
    }

    /// From memory: the database probe's last word (one query a second) and the gateway connections.
    static func readiness(health: DatabaseHealth, status: PushStatus) -> Response {
        guard health.isUp else { return Response.text(.serviceUnavailable, "database unreachable") }
        guard status.connectedCount > 0 else { return Response.text(.serviceUnavailable, "not connected to the gateway") }
        if status.gatewayStalled {
            return Response.text(.serviceUnavailable, "the gateway stopped reading (a stalled connection was closed)")
        }
        if let app = status.unusableApps.first {
            return Response.text(.serviceUnavailable, "app \(app.name) cannot send: \(app.reason)")
        }
        if status.wrongEnvironment {
            return Response.text(
                .serviceUnavailable,
                "APNs or FCM refuses most tokens (BadDeviceToken/DeviceTokenNotForTopic/SENDER_ID_MISMATCH): wrong topic or environment, or another Firebase project?"
            )
        }
        return Response.text(.ok, "ready")
    }
}
