import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import ServiceLifecycle
import Shared

/// The push daemon: drains `push_queue` over kept-open binary gateway connections (the tutorial's `push.php`).
///
/// Wakes on `NOTIFY push_queue` and polls every `poll_interval`; claims batches under leases so several daemons
/// share one queue; settles results in the database in batches; renews its leases and returns rows of dead daemons
/// to the queue. At graceful shutdown it stops claiming, lets the gateway object to what was written, records every
/// result and gives unsent rows back.
public final class PushService: Service, Sendable {
    let configuration: Configuration
    let tls: NIOSSLContext
    let logger: Logger
    let instance: String
    let group: any EventLoopGroup
    /// The daemon's figures, served at `/metrics` on the status listener.
    public let metrics: PushMetrics
    let onStatusServerRunning: @Sendable (Int) async -> Void
    /// HTTP/2 only: token or certificate authentication and the topic.
    let http2Authentication: HTTP2Authentication?

    /// - Parameter instance: the name stored in `claimed_by`; default `host:pid`.
    public init(
        configuration: Configuration,
        tls: NIOSSLContext,
        logger: Logger,
        instance: String? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        metrics: MetricsRegistry = MetricsRegistry(),
        http2Authentication: HTTP2Authentication? = nil,
        onStatusServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
    ) {
        self.metrics = PushMetrics(registry: metrics)
        self.http2Authentication = http2Authentication
        self.onStatusServerRunning = onStatusServerRunning
        self.configuration = configuration
        self.tls = tls
        self.logger = logger
        self.group = group
        self.instance = instance ?? "\(ProcessInfo.processInfo.hostName):\(getpid())"
    }

    public func run() async throws {
        let mode = configuration.mode.rawValue
        let transport =
            configuration.apns.transport == .http2 ? "HTTP/2 to \(configuration.apns.host)" : "binary to \(configuration.apns.gateway)"
        logger.info("Push daemon started (\(mode) mode, \(transport))", metadata: ["push.instance": "\(instance)"])
        let settings = configuration.push
        let client = Database.makeClient(url: configuration.databaseURL, applicationName: "pushchat-push", logger: logger)
        let queue = PushQueue(client: client, instance: instance, lease: settings.lease, logger: logger)
        let signal = QueueSignal()
        let shutdown = ShutdownFlag(signal: signal)
        let held = HeldRows()
        let metrics = self.metrics
        let status = PushStatus()
        let outcomes = Outcomes(queue: queue, held: held, metrics: metrics, logger: logger)
        let connector = GatewayConnector(endpoint: configuration.apns.gateway, tls: tls, group: group)
        let http2Connector = HTTP2Connector(
            endpoint: configuration.apns.host,
            tls: tls,
            group: group,
            requestTimeout: settings.requestTimeout
        )
        var tokens: ProviderTokenCache?
        if case .token(let signer, _) = http2Authentication { tokens = ProviderTokenCache(signer: signer) }
        if configuration.apns.transport == .http2 && http2Authentication == nil {
            logger.critical("HTTP/2 transport without credentials: nothing will be sent")
        }
        let encoder = BinaryEncoder(expiry: settings.expirySeconds, priority: settings.priority)
        let listener = QueueListener(url: configuration.databaseURL, signal: signal, logger: logger)
        let logger = self.logger

        // The pool must outlive graceful shutdown (results are recorded while draining), but PostgresClient.run()
        // stops at graceful shutdown by itself; so it runs outside that scope and is cancelled last, below.
        let pool = Task.detached { await client.run() }
        defer { pool.cancel() }
        await withTaskGroup(of: Void.self) { background in
            background.addTask { await listener.run() }
            background.addTask {
                await Self.maintainLeases(queue: queue, held: held, lease: settings.lease, signal: signal, logger: logger)
            }
            let pollInterval = configuration.pollInterval
            background.addTask { await Self.sampleQueue(queue: queue, metrics: metrics, every: pollInterval) }
            let statusServer = StatusServer.build(
                settings: settings,
                client: client,
                status: status,
                metrics: metrics,
                logger: logger,
                onRunning: onStatusServerRunning
            )
            background.addTask {
                do {
                    try await statusServer.run()
                } catch {
                    logger.error(
                        "Status listener on \(settings.statusHost):\(settings.statusPort) failed: \(error); /healthz, /readyz and /metrics are unavailable"
                    )
                }
            }
            await withTaskGroup(of: Void.self) { recording in
                recording.addTask { await outcomes.run() }
                await withGracefulShutdownHandler {
                    await withTaskGroup(of: Void.self) { workers in
                        for index in 0..<settings.connections {
                            var workerLogger = logger
                            if settings.connections > 1 { workerLogger[metadataKey: "push.connection"] = "\(index + 1)" }
                            if configuration.apns.transport == .http2, let authentication = http2Authentication {
                                let worker = HTTP2Worker(
                                    settings: settings,
                                    pollInterval: configuration.pollInterval,
                                    topic: authentication.topic,
                                    tokens: tokens,
                                    queue: queue,
                                    outcomes: outcomes,
                                    held: held,
                                    signal: signal,
                                    shutdown: shutdown,
                                    connector: http2Connector,
                                    metrics: metrics,
                                    status: status,
                                    index: index + 1,
                                    logger: workerLogger
                                )
                                workers.addTask { await worker.run() }
                                continue
                            }
                            let worker = Worker(
                                settings: settings,
                                pollInterval: configuration.pollInterval,
                                encoder: encoder,
                                queue: queue,
                                outcomes: outcomes,
                                held: held,
                                signal: signal,
                                shutdown: shutdown,
                                connector: connector,
                                metrics: metrics,
                                status: status,
                                index: index + 1,
                                logger: workerLogger
                            )
                            workers.addTask { await worker.run() }
                        }
                    }
                } onGracefulShutdown: {
                    shutdown.request()
                }
                recording.cancelAll()
            }
            // Every worker has settled its connection: record what is left, then stop the rest.
            await outcomes.drain(timeout: .seconds(10))
            background.cancelAll()
        }
        pool.cancel()
        await pool.value
        logger.info("Push daemon stopped")
    }

    /// Samples the queue's depth and the age of its oldest row for the metrics.
    static func sampleQueue(queue: PushQueue, metrics: PushMetrics, every interval: Duration) async {
        while !Task.isCancelled {
            if let (count, age) = try? await queue.depth() {
                metrics.queueDepth.set(count)
                metrics.oldestPendingAge.set(age)
            }
            try? await Task.sleep(for: max(interval, .seconds(1)))
        }
    }

    /// Renews the leases of rows in flight and returns expired claims (of daemons that died) to the queue.
    static func maintainLeases(queue: PushQueue, held: HeldRows, lease: Duration, signal: QueueSignal, logger: Logger) async {
        while !Task.isCancelled {
            do {
                let returned = try await queue.reclaimExpired()
                if returned > 0 {
                    logger.info("Returned \(returned) notifications whose lease ran out (their daemon stopped) to the queue")
                    signal.signal()
                }
                try await queue.renew(held.snapshot)
            } catch {
                logger.warning("Cannot renew leases: \(DatabaseError.describe(error))")
            }
            try? await Task.sleep(for: lease / 3)
        }
    }
}
