import Foundation
package import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
package import Observability
import ServiceLifecycle
package import Settings
package import Storage
import Support
import Webhooks

/// Delivers the outbox (issue 45): for each enabled webhook a loop of its own claims its due rows (`SKIP LOCKED`, under
/// a lease: several daemons share the outbox) and POSTs them, up to `webhook_concurrency` at once, signed with the
/// Standard Webhooks headers. A 2xx deletes the row; anything else, a timeout or a refused connection leaves it for the
/// webhook's next try after a backoff; past the retry window of failures in a row the webhook is disabled. It runs on
/// its own database client and connections: a slow or dead receiver never holds back a notification. While this
/// daemon drains a broadcast at full speed (``BroadcastPressure``) it POSTs only events older than
/// `webhook_broadcast_lag`: the notifications have the machine first, the events follow once the backlog is gone.
package struct WebhookDeliverer: Service {
    let database: DatabaseClient
    let outbox: WebhookOutbox
    let settings: WebhookSettings
    let metrics: WebhookMetrics
    let logger: Logger
    let poster: WebhookPoster
    /// How often the list of webhooks is read again, and an idle webhook's outbox looked at.
    let poll: Duration
    let retry: WebhookRetry
    /// The sending's side (nil: POST at once whatever it does).
    let pressure: BroadcastPressure?

    package init(
        database: DatabaseClient,
        settings: WebhookSettings,
        registry: MetricsRegistry,
        logger: Logger,
        poll: Duration = .milliseconds(500),
        pressure: BroadcastPressure? = nil
    ) throws {
        self.database = database
        self.pressure = pressure
        self.outbox = WebhookOutbox(database: database, logger: logger)
        self.settings = settings
        self.metrics = WebhookMetrics(registry: registry)
        self.logger = logger
        self.poll = poll
        self.retry = WebhookRetry(first: settings.retryFirst, window: settings.retryWindow)
        var tls = TLSConfiguration.makeClientConfiguration()
        if let file = settings.caFile { tls.trustRoots = .file(file) }
        self.poster = WebhookPoster(
            tls: try NIOSSLContext(configuration: tls),
            group: MultiThreadedEventLoopGroup.singleton,
            timeout: settings.timeout,
            privateHosts: settings.privateHosts
        )
    }

    /// The webhooks as last read, shared by their loops (a rotation or a new URL is used from the next POST on).
    final class Receivers: Sendable {
        let current = NIOLockedValueBox<[Int64: WebhookOutbox.Receiver]>([:])
        func receiver(_ id: Int64) -> WebhookOutbox.Receiver? { current.withLockedValue { $0[id] } }
    }

    package func run() async throws {
        try? await cancelWhenGracefulShutdown { try await self.deliver() }
    }

    /// Keeps a loop per enabled webhook, and samples the outbox, until cancelled (at graceful shutdown: a POST under
    /// way is cut, its row sent again after the lease).
    func deliver() async throws {
        try await database.waitForPool()
        let receivers = Receivers()
        await withDiscardingTaskGroup { group in
            var running: Set<Int64> = []
            var lastSample = ContinuousClock.now - .seconds(60)
            while !Task.isCancelled {
                if let list = try? await outbox.receivers() {
                    receivers.current.withLockedValue { $0 = Dictionary(uniqueKeysWithValues: list.map { ($0.id, $0) }) }
                    running.formIntersection(list.map(\.id))
                    for receiver in list where !running.contains(receiver.id) {
                        running.insert(receiver.id)
                        group.addTask { await self.deliver(webhook: receiver.id, receivers: receivers) }
                    }
                }
                // Completed notifications' events, written here once every result is in (the result statements only
                // note the notification: judging it there would lock it in every one of them).
                if !receivers.current.withLockedValue(\.isEmpty) {
                    do {
                        try await outbox.sweepCompletions()
                    } catch {
                        logger.debug("Webhooks: the completed notifications could not be swept: \(error)")
                    }
                }
                if ContinuousClock.now - lastSample >= .seconds(5) {
                    lastSample = .now
                    await sample()
                }
                try? await Task.sleep(for: poll * 2)
            }
            receivers.current.withLockedValue { $0 = [:] }
        }
    }

    /// One webhook's loop: ends when it is removed or disabled (its receiver leaves the list) or at shutdown.
    func deliver(webhook: Int64, receivers: Receivers) async {
        while !Task.isCancelled, let receiver = receivers.receiver(webhook) {
            let posts: [WebhookOutbox.Post]
            do {
                let held = pressure?.isDraining() == true ? settings.broadcastLag : .zero
                posts = try await outbox.claim(
                    webhook: webhook,
                    limit: settings.concurrency,
                    lease: settings.timeout * 2 + .seconds(30),
                    olderThan: held
                )
            } catch {
                logger.debug("Webhook \(receiver.name): the outbox could not be read: \(error)")
                try? await Task.sleep(for: poll * 2)
                continue
            }
            guard !posts.isEmpty else {
                try? await Task.sleep(for: poll)
                continue
            }
            await withDiscardingTaskGroup { group in
                for post in posts { group.addTask { await self.send(post, to: receiver) } }
            }
        }
    }

    func send(_ post: WebhookOutbox.Post, to receiver: WebhookOutbox.Receiver) async {
        let metadata: Logger.Metadata = ["webhook.name": "\(receiver.name)", "webhook.id": "\(post.messageID)"]
        guard post.events != "[]" else {
            // Its notification.sent rows were deleted from push_history before it went (queue prune keeps them: by
            // hand): there is nothing to POST.
            logger.warning("Webhook \(receiver.name): the rows of \(post.eventCount) events are gone; not sent", metadata: metadata)
            try? await outbox.discard(post.id)
            return
        }
        let outcome: Result<Int, any Error>
        do {
            let url = try WebhookURL(parsing: receiver.url, privateHosts: settings.privateHosts)
            let body = Array("{\"events\":\(post.events)}".utf8)
            let timestamp = Int64(Date().timeIntervalSince1970)
            var secrets = [try WebhookSecret(parsing: receiver.secret)]
            if let previous = receiver.previousSecret { secrets.append(try WebhookSecret(parsing: previous)) }
            let headers = [
                ("webhook-id", post.messageID),
                ("webhook-timestamp", String(timestamp)),
                ("webhook-signature", WebhookSignature.header(id: post.messageID, timestamp: timestamp, body: body, secrets: secrets)),
            ]
            outcome = .success(try await poster.post(to: url, headers: headers, body: body))
        } catch {
            outcome = .failure(error)
        }
        let error: String
        switch outcome {
        case .success(let status) where (200..<300).contains(status):
            do {
                try await outbox.delivered(post.id, webhook: receiver.id)
                metrics.delivered(webhook: receiver.name, events: post.eventCount)
                logger.debug("Webhook \(receiver.name): \(post.eventCount) events delivered (\(status))", metadata: metadata)
            } catch {
                // Taken by the receiver, not recorded: sent again after the lease (at least once; the ids are stable).
                logger.warning("Webhook \(receiver.name): delivered, but not recorded (sent again later): \(error)", metadata: metadata)
            }
            return
        case .success(let status):
            error = "HTTP \(status)"
        case .failure(let failure):
            error = "\(failure)"
        }
        metrics.failedAttempt(webhook: receiver.name)
        let delay = retry.delay(afterAttempt: receiver.failures + 1, jitter: Double.random(in: 0...1))
        do {
            let disabled = try await outbox.failed(post.id, webhook: receiver.id, error: error, retryIn: delay, window: retry.window)
            if disabled {
                logger.error(
                    "Webhook \(receiver.name) disabled: its POSTs failed for the whole retry window (\(retry.window.formatted)); last: \(error). Its events wait; pushchat-api webhooks enable \(receiver.name) sends them again",
                    metadata: metadata
                )
            } else {
                logger.warning("Webhook \(receiver.name): POST failed (\(error)); trying again in \(delay.formatted)", metadata: metadata)
            }
        } catch {
            logger.warning(
                "Webhook \(receiver.name): POST failed, not recorded (tried again after the lease): \(error)",
                metadata: metadata
            )
        }
    }

    /// The outbox's figures, and what disabled webhooks left past the window pruned.
    func sample() async {
        guard let backlog = try? await outbox.backlog() else { return }
        metrics.backlog(backlog)
        if let pruned = try? await outbox.prune(window: retry.window), pruned > 0 {
            logger.info("Pruned \(pruned) webhook POSTs that waited past the retry window for disabled webhooks")
        }
    }
}
