import APNs
import Foundation
import Logging
import Metrics
import NIOCore
import NIOSSL
import Observability
import Settings
import Storage
import Support

/// One kept-open gateway connection and the loop that feeds it: claim a batch, write it as command 2 frames in
/// one TLS write, settle what stayed unanswered, and on an error response or a drop settle the window and carry the
/// rest to the next connection. Reconnects forever with backoff; stops cleanly at graceful shutdown.
struct BinaryWorker: PushWorker {
    let context: WorkerContext
    let connector: BinaryConnector
    let encoder: BinaryEncoder
    /// This worker's number (1…), the `connection` label of its metrics.
    let index: Int
    /// The service's logger, with `push.connection` when there are several.
    let logger: Logger

    typealias End = BinarySessionState.End

    func run() async {
        var backoff = Backoff()
        var carry: [QueuedNotification] = []
        var limit = settings.window
        var attempts = 0
        let inFlight = metrics.inFlight(connection: index)
        while !shutdown.isRequested {
            logger.info("Connecting to \(connector.endpoint)")
            if attempts > 0 { metrics.reconnects.increment() }
            attempts += 1
            var progressed = false
            do {
                let (channel, alarm) = try await connector.connect()
                logger.info("Connection OK")
                let session = BinarySession(capacity: settings.window, limit: limit, carry: carry, alarm: alarm)
                carry = []
                status.connectionOpened()
                metrics.connected.increment()
                let end = await run(session, on: channel, inFlight: inFlight)
                metrics.connected.decrement()
                status.connectionClosed()
                inFlight.set(0)
                if case .stalled = end { status.gatewayStalled(true) }
                let settlement = session.end(end)
                carry = settle(settlement, end: end)
                limit = settlement.nextLimit
                progressed = settlement.progressed
            } catch {
                logger.error("\(error)")
            }
            guard await Reconnect.next(&backoff, progressed: progressed, signal: signal, shutdown: shutdown, logger: logger) else {
                break
            }
        }
        Reconnect.giveBack(carry, outcomes: outcomes, logger: logger)
    }

    // MARK: One connection

    /// Runs the connection's reader and writer until it ends; how it ended. Each task answers an ``End``, or nil
    /// for the writer that stopped because the connection ended (the reader has the verdict).
    private func run(_ session: BinarySession, on channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, inFlight: Meter) async -> End {
        do {
            return try await channel.executeThenClose { inbound, outbound in
                try await withThrowingTaskGroup(of: End?.self) { group in
                    group.addTask { await read(inbound, session: session) }
                    group.addTask { await write(outbound, session: session, inFlight: inFlight) }
                    var end = try await group.next()!
                    if end == nil { end = try await group.next()! }
                    if case .drained = end {
                        // Shutting down: everything is written; give the gateway a moment to object.
                        group.addTask {
                            try? await Task.sleep(for: min(settings.settle, .seconds(1)))
                            return .drained
                        }
                        // An error response in that moment wins; the connection closing (or the writer) does not.
                        if case .errorResponse(let response) = try await group.next()! { end = .errorResponse(response) }
                    }
                    session.stop()
                    group.cancelAll()
                    return end ?? .closed("the connection ended", refused: false)
                }
            }
        } catch {
            session.stop()
            return .closed("\(error)", refused: error is NIOSSLError)
        }
    }

    private func read(_ inbound: NIOAsyncChannelInboundStream<ByteBuffer>, session: BinarySession) async -> End {
        var buffer = ByteBuffer()
        do {
            for try await chunk in inbound {
                buffer.writeImmutableBuffer(chunk)
                if let response = try BinaryErrorResponse.read(from: &buffer) {
                    session.stop()
                    return .errorResponse(response)
                }
            }
            session.stop()
            return .closed("the gateway closed the connection without an error response", refused: false)
        } catch {
            session.stop()
            return .closed(GatewayError.describe(error), refused: error is NIOSSLError)
        }
    }

    private func write(_ outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>, session: BinarySession, inFlight: Meter) async -> End? {
        var databaseBackoff = Backoff(initial: .milliseconds(200), maximum: .seconds(30))
        var buffer = ByteBuffer()
        // While one batch is written the next is claimed (only while claims come back full: an idle queue is not
        // polled in a loop).
        var prefetch: (task: Task<[QueuedNotification], any Error>, limit: Int)?
        while !session.isStopped {
            accepted(session.settle(writtenBefore: .now - settings.settle))
            inFlight.set(session.inFlightCount)
            if shutdown.isRequested {
                await keep(prefetch?.task, in: session)
                return .drained
            }
            let free = session.freeSpace
            var batch = session.takePending(limit: min(free, settings.batchSize))
            let generation = signal.generation
            var claimedFull = false
            if batch.count < settings.batchSize && free > batch.count {
                let limit = min(free - batch.count, settings.batchSize - batch.count)
                do {
                    let request = prefetch ?? (claimAhead(limit: limit), limit)
                    prefetch = nil
                    let claimed = try await request.task.value
                    batch += claimed
                    claimedFull = claimed.count >= request.limit
                    databaseBackoff.reset()
                } catch {
                    if databaseBackoff.failures == 0 {
                        logger.error("Cannot claim notifications: \(DatabaseError.describe(error)); retrying with backoff, connection kept")
                    }
                    if batch.isEmpty {
                        await signal.wait(after: generation, timeout: databaseBackoff.next())
                        continue
                    }
                }
            }
            if batch.isEmpty {
                var timeout = pollInterval
                if let oldest = session.oldestWrite { timeout = min(timeout, max(.milliseconds(1), oldest + settings.settle - .now)) }
                await signal.wait(after: generation, timeout: timeout)
                continue
            }
            if claimedFull && prefetch == nil {
                let next = min(max(0, free - batch.count), settings.batchSize)
                if next > 0 { prefetch = (claimAhead(limit: next), next) }
            }
            do {
                try await send(batch, session: session, outbound: outbound, buffer: &buffer)
            } catch let stall as GatewayStall {
                logger.error("\(stall); closing the connection and sending its notifications again on a new one")
                session.stop()
                await keep(prefetch?.task, in: session)
                return .stalled(stall.description)
            } catch {
                // The connection is gone; the reader reports how.
                break
            }
        }
        await keep(prefetch?.task, in: session)
        return nil
    }

    /// Starts a claim that is not cancelled with the session: once PostgreSQL has leased rows to us we hold them
    /// (the claim registers them) and must send or give them back.
    private func claimAhead(limit: Int) -> Task<[QueuedNotification], any Error> {
        let worker = self
        return Task { try await worker.claim(limit: limit) }
    }

    /// Rows of a claim still under way when the session ends wait for the next connection.
    private func keep(_ claim: Task<[QueuedNotification], any Error>?, in session: BinarySession) async {
        guard let claim, let rows = try? await claim.value, !rows.isEmpty else { return }
        session.addPending(rows)
    }

    private func send(
        _ batch: [QueuedNotification],
        session: BinarySession,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
        buffer: inout ByteBuffer
    ) async throws {
        buffer.clear()
        let now = Date()
        var written: [QueuedNotification] = []
        written.reserveCapacity(batch.count)
        for notification in batch {
            if failIfExpired(notification, now: now) { continue }
            if let reason = encoder.write(notification, into: &buffer, now: now) {
                logger.warning(
                    "Message \(notification.messageID) can never be sent: \(reason)",
                    metadata: ["push.message_id": "\(notification.messageID)"]
                )
                outcomes.failed(notification, status: "invalid", reason: reason.description, kind: "unencodable")
                continue
            }
            if logger.logLevel <= .debug {
                logger.debug(
                    "Sending message \(notification.messageID) to \(notification.deviceToken)",
                    metadata: ["push.message_id": "\(notification.messageID)"]
                )
            }
            written.append(notification)
        }
        guard !written.isEmpty, session.append(written, at: .now) else { return }
        // A gateway that stops reading leaves this write waiting for the socket forever (and the rows' leases renewed
        // forever): past push_stall_timeout the connection counts as dead, and its window is sent again elsewhere.
        let bytes = buffer
        do {
            try await withDeadline(settings.stallTimeout) { try await outbound.write(bytes) }
        } catch is DeadlineExceeded {
            throw GatewayStall(limit: settings.stallTimeout)
        }
        session.restampLast(written.count, at: .now)
    }

    // MARK: After a connection

    /// Records what the connection's end settled (the meaning of each end is decided by ``BinarySessionState/end(_:)``);
    /// returns what goes to the next connection.
    private func settle(_ settlement: BinarySessionState.Settlement, end: End) -> [QueuedNotification] {
        accepted(settlement.accepted)
        metrics.resent.increment(by: settlement.resent)
        var carry = settlement.carry
        switch end {
        case .errorResponse(let response):
            if let (failed, response) = settlement.failed {
                if let retry = handleFailure(failed, response: response) {
                    carry.append(retry)
                    carry.sort { $0.messageID < $1.messageID }
                }
            } else if response.status != .shutdown {
                logger.warning("Gateway answered \(response) for a notification no longer in flight; resending \(settlement.resent)")
            }
            if response.status == .shutdown {
                logger.info(
                    "Gateway is shutting down (last accepted: \(response.identifier)); resending \(settlement.resent) on a new connection"
                )
            }
        case .closed(let reason, _), .stalled(let reason):
            if settlement.resent > 0 {
                logger.warning(
                    "Connection lost (\(reason)); resending \(settlement.resent) notifications that may have arrived (possible duplicates)"
                )
            } else {
                logger.warning("Connection lost (\(reason))")
            }
        case .drained:
            break
        }
        return carry
    }

    /// Rows the gateway accepted (by silence, or before the one an error response names).
    private func accepted(_ items: [QueuedNotification]) {
        guard !items.isEmpty else { return }
        outcomes.sent(items)
        status.answered(other: items.count)
        status.gatewayStalled(false)  // a gateway that takes notifications reads again
    }

    /// Records the row an error response names; the row to send again, if it gets another try.
    private func handleFailure(_ failed: QueuedNotification, response: BinaryErrorResponse) -> QueuedNotification? {
        let metadata: Logger.Metadata = ["push.message_id": "\(failed.messageID)", "apns.status": "\(response.status.rawValue)"]
        switch response.status {
        case .invalidToken:
            // Not valid for this topic and environment: the notification fails, the user stays (only the feedback
            // service's tuples delete users on this interface).
            logger.warning(
                "Message \(failed.messageID) refused: invalid token \(DeviceToken.redacted(failed.deviceToken)) (the user is kept)",
                metadata: metadata
            )
            outcomes.failed(failed, status: "8", reason: "invalid token", kind: "invalid_token")
            status.answered(wrong: 1)
        case .processingError, .unknown:
            if failed.retries < settings.maxRetries {
                var retry = failed
                retry.retries += 1
                logger.warning("Message \(failed.messageID): gateway status \(response.status); retry \(retry.retries)", metadata: metadata)
                return retry
            } else {
                logger.error(
                    "Message \(failed.messageID): gateway status \(response.status) after \(failed.retries) retries; giving up",
                    metadata: metadata
                )
                outcomes.failed(
                    failed,
                    status: "\(response.status.rawValue)",
                    reason: "\(response.status) after \(failed.retries) retries",
                    kind: response.status.metricLabel
                )
            }
        default:
            logger.error("Message \(failed.messageID) refused: status \(response.status)", metadata: metadata)
            outcomes.failed(
                failed,
                status: "\(response.status.rawValue)",
                reason: response.status.description,
                kind: response.status.metricLabel
            )
        }
        return nil
    }
}

extension BinaryErrorResponse.Status {
    /// `invalid token` → `invalid_token`.
    var metricLabel: String { String(name.map { $0 == " " ? "_" : $0 }) }
}

/// The binary gateway took no bytes for `push_stall_timeout` while a write waited: it stopped reading.
struct GatewayStall: PushChatError {
    typealias Code = ErrorCode<GatewayStall>
    var code: Code { .stalled }
    let limit: Duration
    var reason: String { "the gateway took no bytes for \(limit.formatted) (it stopped reading)" }
    var description: String { reason }
}

extension ErrorCode where Domain == GatewayStall {
    static let stalled = Self("stalled")
}
