import APNs
import APNsTransport
import AsyncHTTPClient
import CoreMetrics
import Foundation
package import Logging
import NIOCore
package import Observability
import PostgresNIO
package import ServiceLifecycle
package import Settings
import Storage
import Support

/// The push daemon: drains `push_queue` over kept-open gateway connections (the tutorial's `push.php`).
///
/// Wakes on `NOTIFY push_queue` and polls every `poll_interval`; claims batches under leases so several daemons
/// share one queue; settles results in the database in batches; renews its leases and returns rows of dead daemons
/// to the queue. At graceful shutdown it stops claiming, lets the gateway object to what was written, records every
/// result and gives unsent rows back.
///
/// It uses a PostgreSQL pool it does not run: ``services(configuration:logger:instance:metrics:onStatusServerRunning:)``
/// gives the pool and the service to one `ServiceGroup`, which shuts the service down first and the pool after it,
/// once every result is recorded.
package final class PushService: Service, Sendable {
    let configuration: Configuration
    /// The default app's senders, one per platform the configuration sets up (``DestinationRegistry``).
    let destinations: [any DestinationSource]
    let database: DatabaseClient
    let logger: Logger
    let instance: String
    /// The daemon's figures, served at `/metrics` on the status listener.
    package let metrics: PushMetrics
    let onStatusServerRunning: @Sendable (Int) async -> Void
    /// Whether a broadcast drains at full speed, for the webhook deliverer beside this service.
    package let pressure = BroadcastPressure()

    /// - Parameter instance: the name stored in `claimed_by`; default `host:pid`.
    init(
        configuration: Configuration,
        destinations: [any DestinationSource],
        database: DatabaseClient,
        logger: Logger,
        instance: String? = nil,
        metrics: MetricsRegistry = MetricsRegistry(),
        onStatusServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.destinations = destinations
        self.database = database
        self.logger = logger
        self.instance = instance ?? "\(ProcessInfo.processInfo.hostName):\(getpid())"
        self.metrics = PushMetrics(registry: metrics)
        self.metrics.watchDatabase(database.health)
        self.onStatusServerRunning = onStatusServerRunning
    }

    /// The daemon as a `ServiceGroup` runs it: its PostgreSQL pool, then the service (shut down in reverse order, so
    /// the pool outlives the drain). Loads the default app's senders first: a file that cannot be used throws here,
    /// before anything runs (exit 78).
    package static func services(
        configuration: Configuration,
        logger: Logger,
        instance: String? = nil,
        metrics: MetricsRegistry = MetricsRegistry(),
        onStatusServerRunning: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
    ) throws -> [any Service] {
        let destinations = try DestinationRegistry.load(configuration)
        let database = DatabaseClient(url: configuration.databaseURL, applicationName: "pushchat-push", logger: logger)
        let service = PushService(
            configuration: configuration,
            destinations: destinations,
            database: database,
            logger: logger,
            instance: instance,
            metrics: metrics,
            onStatusServerRunning: onStatusServerRunning
        )
        // Webhooks' POSTs on a client of their own (its own connections): a slow receiver never holds a connection the
        // sending needs.
        let webhookDatabase = DatabaseClient(url: configuration.databaseURL, applicationName: "pushchat-push webhooks", logger: logger)
        let deliverer = try WebhookDeliverer(
            database: webhookDatabase,
            settings: configuration.webhooks,
            registry: metrics,
            logger: logger,
            pressure: service.pressure
        )
        return [database, webhookDatabase, service, deliverer]
    }

    package func run() async throws {
        logger.info(
            "Push daemon started (\(configuration.mode.rawValue) mode, \(DestinationRegistry.describe(destinations)))",
            metadata: ["push.instance": "\(instance)"]
        )
        if let expiry = try? configuration.apns.certificateExpiry() {
            metrics.certificateExpires(expiry, app: App.defaultName)
            let days = Int(expiry.timeIntervalSinceNow / 86_400)
            let line: Logger.Message = "APNs client certificate valid until \(expiry.formatted(.iso8601)) (\(days) days)"
            if days < 30 { logger.warning("\(line): renew it (the guide's §10)") } else { logger.info(line) }
        }
        let status = PushStatus(alarm: metrics.wrongEnvironment, logger: logger)
        await withTaskGroup(of: Void.self) { outer in
            // Served from the start: /readyz says "database unreachable" while the daemon waits for it.
            outer.addTask { await self.runStatusServer(status) }
            await drain(status: status)
            outer.cancelAll()
        }
        logger.info("Push daemon stopped")
    }

    /// Waits for the database's pool, then drains until graceful shutdown.
    func drain(status: PushStatus) async {
        // The pool exists once the first connection told how sessions reach PostgreSQL; a shutdown before that ends here.
        guard (try? await cancelWhenGracefulShutdown({ try await self.database.waitForPool() })) != nil else {
            logger.info("Push daemon stopped before the database answered")
            return
        }
        let (context, queue) = makeContext(status: status)
        // Before the first claim, so that rows move from the start (the lease keeper asks again as it runs).
        if (try? await queue.refreshHistoryMode()) == true { logger.info("Rows sent or failed for good move to push_history") }
        let listener = QueueListener.choose(
            configuration: configuration,
            session: database.session,
            signal: context.signal,
            cursors: queue.cursors,
            logger: logger
        )
        await withTaskGroup(of: Void.self) { background in
            background.addTask { await listener?.run() }
            background.addTask { await Self.maintainLeases(context, queue: queue) }
            background.addTask { await Self.sampleQueue(context, queue: queue) }
            let broadcasts = BroadcastExpansion(broadcasts: BroadcastQueue(database: database, logger: logger), context: context)
            background.addTask { await broadcasts.run() }
            await withTaskGroup(of: Void.self) { recording in
                recording.addTask { await context.outcomes.run() }
                await withGracefulShutdownHandler {
                    await runWorkers(context)
                } onGracefulShutdown: {
                    context.shutdown.request()
                }
                recording.cancelAll()
            }
            // Every worker has settled its connection: record what is left, then stop the rest.
            await context.outcomes.drain(timeout: .seconds(10))
            await Self.releaseStranded(context, queue: queue)
            background.cancelAll()
        }
        await context.broadcastThreads?.shutdown()
    }

    /// The drivers' context, and the queue the service's own tasks use (leases, sampling, stranded rows).
    func makeContext(status: PushStatus) -> (WorkerContext, PushQueue) {
        var queue = PushQueue(database: database, instance: instance, lease: configuration.push.lease, logger: logger)
        queue.retryLimit = PushQueue.RetryLimit(attempts: configuration.push.maxAttempts, age: configuration.push.maxAge)
        let signal = QueueSignal()
        let held = HeldRows()
        let rate = configuration.push.broadcastRate
        let chatTarget = configuration.push.chatTarget > .zero ? configuration.push.chatTarget : nil
        if rate > 0 {
            logger.info("Broadcast rows go out at \(rate)/s at most (push_broadcast_rate); other notifications are not held back")
        }
        let nice = configuration.push.broadcastNice
        if nice > 0 {
            logger.debug("Broadcasts' connections run on threads of their own at nice \(nice) (push_broadcast_nice)")
        }
        let context = WorkerContext(
            settings: configuration.push,
            pollInterval: configuration.pollInterval,
            rows: queue,
            outcomes: Outcomes(recorder: queue, held: held, metrics: metrics, logger: logger),
            held: held,
            signal: signal,
            shutdown: ShutdownFlag(signal: signal),
            metrics: metrics,
            status: status,
            logger: logger,
            broadcastRate: rate > 0 || chatTarget != nil ? BroadcastRate(perSecond: rate > 0 ? rate : nil, chatTarget: chatTarget) : nil,
            pressure: pressure,
            broadcastThreads: nice > 0 ? BroadcastThreads(nice: Int32(nice)) : nil,
            broadcastClaims: ClaimGate()
        )
        return (context, queue)
    }

    /// The default app's lanes on every platform (``DestinationSource/defaultAppLanes``, `push_connections` each), and
    /// the other apps' senders, until graceful shutdown.
    func runWorkers(_ context: WorkerContext) async {
        await withTaskGroup(of: Void.self) { workers in
            for source in destinations {
                let context = context.forApp(App.defaultName, platform: source.platform, shutdown: context.shutdown)
                let lanes = source.defaultAppLanes.map { $0.with(connections: configuration.push.connections) }
                workers.addTask { await SenderLanes.run(source, lanes: lanes, context: context, logger: self.logger) }
            }
            // The other apps' senders, each on its own connection while it has rows.
            let apps = AppSenders(configuration: configuration, context: context, catalog: AppCatalog(database: database, logger: logger))
            workers.addTask { await apps.run() }
        }
    }

    func runStatusServer(_ status: PushStatus) async {
        let settings = configuration.push
        let server = StatusServer.build(
            settings: settings,
            health: database.health,
            status: status,
            metrics: metrics,
            logger: logger,
            onRunning: onStatusServerRunning
        )
        do {
            try await server.run()
        } catch {
            logger.error(
                "Status listener on \(settings.statusHost):\(settings.statusPort) failed: \(error); /healthz, /readyz and /metrics are unavailable"
            )
        }
    }

    /// Samples the queue's depth and the age of its oldest row for the metrics: every second, or less often when
    /// counting is slow (it visits every pending index entry, and an open snapshot keeps dead ones there), so the
    /// sampling never takes more than a twentieth of a database connection's time.
    static func sampleQueue(_ context: WorkerContext, queue: PushQueue) async {
        while !Task.isCancelled {
            let start = ContinuousClock.now
            context.metrics.broadcastPace.set(context.broadcastRate?.pace ?? 0)
            if let sample = try? await queue.sample() {
                context.metrics.queueDepth.set(sample.count)
                context.metrics.oldestPendingAge.set(sample.oldestAge)
                context.metrics.pending(byLane: sample.lanes)
            }
            try? await Task.sleep(for: max(context.pollInterval, .seconds(1), start.duration(to: .now) * 20))
        }
    }

    /// Rows still held once every worker stopped and every result was recorded were claimed and never settled (a
    /// worker lost them): they go back to the queue now rather than when their lease runs out.
    static func releaseStranded(_ context: WorkerContext, queue: PushQueue) async {
        let stranded = context.held.snapshot
        guard !stranded.isEmpty else { return }
        context.logger.error("\(stranded.count) claimed notifications were neither sent nor given back; returning them to the queue")
        do {
            try await queue.release(stranded)
            context.held.remove(stranded)
        } catch {
            context.logger.error("Cannot return them (\(DatabaseError.describe(error))): their leases will")
        }
    }

    /// Renews the leases of rows in flight and returns expired claims (of daemons that died) to the queue; asks whether
    /// rows move to `push_history` yet (after `migrate --contract`, which may run while the daemon does).
    static func maintainLeases(_ context: WorkerContext, queue: PushQueue) async {
        var lastProbe = ContinuousClock.now
        while !Task.isCancelled {
            do {
                let moving = queue.history.moving
                if try await queue.refreshHistoryMode(), !moving {
                    context.logger.info("Rows sent or failed for good move to push_history")
                }
                // Our own leases first: after an outage longer than the lease they have run out too, and the rows
                // they hold were written (a second claim would send them twice).
                let held = context.held.snapshot
                try await queue.renew(held)
                let returned = try await queue.reclaimExpired(keeping: held)
                if returned > 0 {
                    context.logger.info("Returned \(returned) notifications whose lease ran out (their daemon stopped) to the queue")
                    context.signal.signal()
                }
                // While NOTIFYs say where rows appear, the claims never go back to the start: this looks behind them.
                if queue.cursors.isListening, lastProbe.duration(to: .now) >= ClaimCursor.listeningRescan {
                    lastProbe = .now
                    if try await queue.probeBehindCursors() > 0 {
                        context.logger.info("Found notifications behind the claim cursors that no NOTIFY announced; claiming them now")
                        context.signal.signal()
                    }
                }
            } catch {
                context.logger.warning("Cannot renew leases: \(DatabaseError.describe(error))")
            }
            try? await Task.sleep(for: context.settings.lease / 3)
        }
    }
}
