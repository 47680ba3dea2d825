import APNs
import Foundation
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import Observability
import Settings
import Storage
import Support

/// One kept-open HTTP/2 connection and the tasks that feed it: a claimer keeps rows claimed ahead, a writer sends
/// each on its own stream (as many at once as the server allows, up to `push_window`), a reader records each answer;
/// on GOAWAY or a dead connection, what went unanswered or was claimed ahead is sent on a new one. Reconnects forever
/// with backoff; stops cleanly at graceful shutdown.
struct HTTP2Worker: PushWorker {
    let context: WorkerContext
    let connector: HTTP2Connector
    let topic: String
    let tokens: ProviderTokenCache?
    /// This worker's number (1…), the `connection` label of its metrics.
    let index: Int
    /// The service's logger, with `push.connection` when there are several.
    let logger: Logger
    /// Shared by the daemon's connections: connection 1 is always open, the others open while the open ones are
    /// saturated and close when idle (nil: this connection is always open).
    var demand: ConnectionDemand? = nil

    /// Opens only on demand and closes when idle.
    var isElastic: Bool { demand != nil && index > 1 }

    func run() async {
        var backoff = Backoff()
        var carry: [QueuedNotification] = []
        var attempts = 0
        let inFlight = metrics.inFlight(connection: index)
        while !shutdown.isRequested {
            if let demand, isElastic, carry.isEmpty {
                // Dormant until every open connection's streams are saturated while rows wait.
                guard await waitForDemand(demand) else { break }
                logger.info("The open connections' streams are saturated: opening connection \(index)")
            }
            logger.info("Connecting to \(connector.endpoint) (HTTP/2)")
            if attempts > 0 { metrics.reconnects.increment() }
            attempts += 1
            let session = HTTP2Session(carry: carry)
            carry = []
            do {
                let (channel, handler, events) = try await connector.connect()
                logger.info("Connection OK (HTTP/2)")
                demand?.opened(index)
                status.connectionOpened()
                metrics.connected.increment()
                // The reader runs until the connection's events end (every request is accounted for by then); the
                // writer until the session closes, then it waits for the answers in flight and closes the connection.
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { await read(events, session: session) }
                    group.addTask { await write(session: session, channel: channel, handler: handler, inFlight: inFlight) }
                    group.addTask { await claim(session: session) }
                    await group.waitForAll()
                }
                metrics.connected.decrement()
                status.connectionClosed()
                demand?.closed(index)
                inFlight.set(0)
            } catch {
                logger.error("Cannot connect to \(connector.endpoint): \(GatewayError.describe(error))")
            }
            let (unsent, answered, idle) = session.read { ($0.unsent, $0.answered, $0.closedIdle) }
            carry = unsent
            if idle {
                logger.info(
                    "Connection \(index) idle for \(settings.connectionIdle.formatted): closed until the streams are saturated again"
                )
                backoff.reset()
                continue
            }
            guard await Reconnect.next(&backoff, progressed: answered > 0, signal: signal, shutdown: shutdown, logger: logger) else {
                break
            }
        }
        Reconnect.giveBack(carry, outcomes: outcomes, logger: logger)
    }

    /// Waits until `demand` wants this connection open (true) or shutdown (false).
    private func waitForDemand(_ demand: ConnectionDemand) async -> Bool {
        while !shutdown.isRequested {
            if demand.wants(index) { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    // MARK: Sending

    private func write(
        session: HTTP2Session,
        channel: any Channel,
        handler: NIOLoopBound<HTTP2ClientHandler>,
        inFlight: Meter
    ) async {
        var idleSince: ContinuousClock.Instant?
        while session.isOpen {
            let wakeGeneration = session.wake.generation
            let queueGeneration = signal.generation
            if shutdown.isRequested {
                // Stop sending; what is claimed is given back after the answers in flight (below).
                session.update { $0.stop() }
                break
            }
            // Taking rows from `ready` wakes the claimer to claim more; taking none wakes nobody.
            let (batch, count, saturated, idle) = session.update(
                { state in
                    (state.nextBatch(batchSize: settings.batchSize), state.inFlight, state.isSaturated, state.isIdle)
                },
                wakesIf: { !$0.0.isEmpty }
            )
            inFlight.set(count)
            demand?.report(index, saturated: saturated)
            if isElastic {
                if !idle {
                    idleSince = nil
                } else if let since = idleSince, since.duration(to: .now) >= settings.connectionIdle {
                    session.update { $0.closeIdle() }
                    break
                } else if idleSince == nil {
                    idleSince = .now
                }
            }
            if batch.isEmpty {
                await QueueSignal.wait(for: [(session.wake, wakeGeneration), (signal, queueGeneration)], timeout: .seconds(1))
                continue
            }
            let requests = prepare(batch)
            if requests.count < batch.count { session.update { $0.withdraw(batch.count - requests.count) } }
            guard !requests.isEmpty else { continue }
            let taken = try? await handler.eventLoop.submit { handler.value.send(requests) }.get()
            if taken != true {
                session.update { $0.notTaken(requests.map(\.notification)) }
            }
        }
        // Closing: wait (bounded) for the answers to what is in flight, then hang up; what stays unanswered comes
        // back through the reader.
        let deadline = ContinuousClock.now + settings.requestTimeout + .seconds(1)
        while ContinuousClock.now < deadline {
            let generation = session.wake.generation
            if session.read(\.inFlight) <= 0 { break }
            await session.wake.wait(after: generation, timeout: .milliseconds(100))
        }
        inFlight.set(0)
        try? await channel.close()
    }

    /// Keeps rows claimed ahead of the free streams (at least one window's worth), so sending never waits for
    /// PostgreSQL: claims of `push_batch_size` rows run while earlier rows are on the wire.
    private func claim(session: HTTP2Session) async {
        var databaseBackoff = Backoff(initial: .milliseconds(200), maximum: .seconds(30))
        while !shutdown.isRequested {
            let wakeGeneration = session.wake.generation
            let closingGeneration = session.closing.generation
            let queueGeneration = signal.generation
            let (open, wanted) = session.read { ($0.open, $0.wantsClaim(batchSize: settings.batchSize)) }
            guard open else { return }
            if !wanted {
                await session.wake.wait(after: wakeGeneration, timeout: .seconds(1))
                continue
            }
            do {
                let claimed = try await claim(limit: settings.batchSize)
                databaseBackoff.reset()
                if claimed.isEmpty {
                    // The queue is empty: wait for a NOTIFY (or the poll interval), or for this connection to end.
                    await QueueSignal.wait(for: [(signal, queueGeneration), (session.closing, closingGeneration)], timeout: pollInterval)
                    continue
                }
                session.update { $0.claimed(claimed) }
            } catch {
                if databaseBackoff.failures == 0 {
                    logger.error("Cannot claim notifications: \(DatabaseError.describe(error)); retrying with backoff, connection kept")
                }
                await QueueSignal.wait(
                    for: [(signal, queueGeneration), (session.closing, closingGeneration)],
                    timeout: databaseBackoff.next()
                )
            }
        }
    }

    /// The requests for `batch`; rows that can never be sent on this path are failed at once.
    private func prepare(_ batch: [QueuedNotification]) -> [HTTP2Request] {
        let now = Date()
        var token: (token: String, generation: Int)?
        if let tokens {
            do {
                token = try tokens.current(now: now)
            } catch {
                logger.critical("Cannot sign a provider token: \(error); notifications stay queued")
                outcomes.released(batch)
                return []
            }
        }
        var requests: [HTTP2Request] = []
        requests.reserveCapacity(batch.count)
        for notification in batch {
            if failIfExpired(notification, now: now) { continue }
            let request: HTTP2Notification
            do {
                request = try HTTP2Notification(
                    notification,
                    topic: topic,
                    defaultPriority: Int(settings.priority),
                    defaultExpiry: settings.expirySeconds,
                    now: now
                )
            } catch {
                logger.warning(
                    "Message \(notification.messageID) can never be sent: \(error)",
                    metadata: ["push.message_id": "\(notification.messageID)"]
                )
                outcomes.failed(notification, status: "invalid", reason: error.description, kind: "unencodable")
                continue
            }
            let headers = HTTP2Request.headerBlock(request, authority: connector.authority, bearer: token?.token)
            if logger.logLevel <= .debug {
                logger.debug(
                    "Sending message \(notification.messageID) to \(notification.deviceToken)",
                    metadata: ["push.message_id": "\(notification.messageID)"]
                )
            }
            requests.append(
                HTTP2Request(
                    notification: notification,
                    headers: headers,
                    body: ByteBuffer(string: notification.payload),
                    tokenGeneration: token?.generation ?? 0
                )
            )
        }
        return requests
    }

    // MARK: Answers

    private func read(_ events: AsyncStream<HTTP2Event>, session: HTTP2Session) async {
        var authenticationLogged = false
        for await event in events {
            switch event {
            case .answered(let answers):
                session.update { $0.answered(answers.count) }
                var sent: [QueuedNotification] = []
                sent.reserveCapacity(answers.count)
                for answer in answers {
                    handle(answer, sent: &sent, session: session, authenticationLogged: &authenticationLogged)
                }
                outcomes.sent(sent)
                let wrong = answers.count { $0.result.verdict == .wrongEnvironment }
                status.answered(wrong: wrong, other: answers.count - wrong)
            case .unanswered(let requests, let reason):
                logger.warning("\(requests.count) notifications unanswered (\(reason)); sending them again")
                metrics.resent.increment(by: requests.count)
                session.update { $0.unanswered(requests.map(\.notification)) }
            case .timedOut(let requests, let timeout):
                metrics.resent.increment(by: requests.count)
                let limit = session.update { $0.timedOut(requests.map(\.notification)) }
                logger.warning(
                    "\(requests.count) notifications unanswered (no answer within \(timeout.formatted)); sending them again, at most \(limit) at once"
                )
            case .maxStreams(let value):
                let limit = session.update { $0.allow(maxStreams: value, window: settings.window) }
                logger.debug("The server allows \(value) concurrent streams; sending up to \(limit) at once")
            case .goingAway:
                // Streams up to the GOAWAY's last id are still answered; the writer waits for them, then hangs up.
                logger.info("The connection takes no new streams (GOAWAY, or its stream ids are used up); reconnecting")
                session.update { $0.stop() }
            case .closed(let reason):
                let (answered, open) = session.update { ($0.answered, $0.lost()) }
                if answered == 0 {
                    logger.error("Connection to \(connector.endpoint) failed: \(reason)")
                } else if open {
                    logger.warning("Connection lost (\(reason))")
                }
            }
        }
    }

    /// Acts on one answer; rows APNs accepted are added to `sent` (recorded together by the caller).
    private func handle(
        _ answer: HTTP2Answer,
        sent: inout [QueuedNotification],
        session: HTTP2Session,
        authenticationLogged: inout Bool
    ) {
        let (request, result) = (answer.request, answer.result)
        let notification = request.notification
        // Built only for the answers that are logged (not for each of the many accepted).
        var metadata: Logger.Metadata { ["push.message_id": "\(notification.messageID)", "apns.status": "\(result.status)"] }
        var reason: String { result.reason ?? "HTTP \(result.status)" }
        switch result.verdict {
        case .sent:
            sent.append(notification)
            tokens?.accepted(generation: request.tokenGeneration)
        case .unregistered(let since):
            logger.warning(
                "Message \(notification.messageID) refused: \(result.statusText) for token \(DeviceToken.redacted(notification.deviceToken))",
                metadata: metadata
            )
            let report = PushQueue.InvalidToken(token: notification.deviceToken, reportedAt: since, source: "http2 \(result.statusText)")
            outcomes.failed(notification, status: "\(result.status)", reason: reason, kind: reason, unregistered: report)
        case .wrongEnvironment:
            logger.warning(
                "Message \(notification.messageID) refused: \(result.statusText) (not valid for this topic and environment; the user is kept)",
                metadata: metadata
            )
            outcomes.failed(notification, status: "\(result.status)", reason: reason, kind: reason)
        case .failed:
            logger.error("Message \(notification.messageID) refused: \(result.statusText)", metadata: metadata)
            outcomes.failed(notification, status: "\(result.status)", reason: reason, kind: reason)
        case .retryLater:
            let delay: Duration = result.status == 429 ? .seconds(5) : .seconds(2)
            logger.warning(
                "Message \(notification.messageID): \(result.statusText); trying again in \(delay.formatted)",
                metadata: metadata
            )
            outcomes.deferred(notification, delay: delay, status: "\(result.status)", reason: reason)
        case .expiredToken:
            if (try? tokens?.expired(generation: request.tokenGeneration)) == true {
                logger.notice("APNs called the provider token expired; made a new one and sending again", metadata: metadata)
                session.update { $0.retryFirst(notification) }
            } else {
                logger.critical("APNs refuses even a fresh provider token (ExpiredProviderToken): is the clock right?", metadata: metadata)
                outcomes.deferred(notification, delay: .seconds(60), status: "403", reason: reason)
            }
        case .authenticationFailed:
            if !authenticationLogged {
                authenticationLogged = true
                logger.critical(
                    "APNs refused our credentials: \(result.statusText). Check PUSHCHAT_APNS_KEY_ID, _TEAM_ID, _KEY_FILE or the certificate; notifications stay queued",
                    metadata: metadata
                )
            }
            outcomes.deferred(notification, delay: .seconds(60), status: "403", reason: reason)
        }
    }
}
