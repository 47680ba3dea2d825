import APNs
import APNsTransport
import Foundation
import HTTP2Client
import Logging
import Metrics
import Settings
import Storage
import Support

/// The one loop every destination's connections run in: one kept-open connection at a time, fed from the shared
/// queue, reconnecting with backoff until graceful shutdown.
///
/// Per connection, three tasks share a ``LinkSession``: a claimer keeps rows claimed ahead of the free places (under
/// lease from the moment they are claimed), a writer encodes and sends them (as many in flight as the link allows),
/// and a reader takes the link's events and records each answer by its ``Verdict``. What the connection leaves
/// unanswered or claimed ahead goes first on the next one; at shutdown it goes back to the queue.
struct SenderDriver<D: Destination>: Sendable {
    let context: WorkerContext
    let destination: D
    /// This connection's number (1…), the `connection` label of its metrics.
    let index: Int
    /// The service's logger, with `push.connection` when there are several.
    let logger: Logger
    /// Shared by the daemon's connections when extra ones open on demand: connection 1 is always open, the others
    /// open while the open ones are saturated and close when idle (nil: this connection is always open).
    var demand: ConnectionDemand? = nil
    /// Connects only while its queue (an app's) has unclaimed rows, and closes after `apns_connection_idle` without
    /// work: an app that sends now and then holds no connection in between.
    var onDemand = false

    /// How long a loop waits for an event that should have woken it before it looks anyway (never the pace of
    /// anything: every change it waits for signals it).
    static var safetyWait: Duration { .seconds(30) }

    var settings: PushSettings { context.settings }
    var outcomes: Outcomes { context.outcomes }
    var signal: QueueSignal { context.signal }
    var shutdown: ShutdownFlag { context.shutdown }
    var metrics: PushMetrics { context.metrics }
    var status: PushStatus { context.status }

    /// Opens only on demand and closes when idle.
    var isElastic: Bool { demand != nil && index > 1 }
    /// Closes after `apns_connection_idle` without work.
    var closesWhenIdle: Bool { isElastic || onDemand }

    /// Runs until graceful shutdown, then gives back what it holds.
    func run() async {
        var backoff = Backoff()
        var carry: [QueuedNotification] = []
        var limit = Int.max
        var attempts = 0
        let inFlight = metrics.inFlight(
            app: context.rows.app,
            platform: context.rows.platform.rawValue,
            connection: context.rows.traffic == .bulk ? "bulk-\(index)" : "\(index)"
        )
        // The series exist at 0 before the first connection: an alert sees a sender that never connected, and
        // increase() sees the first refusal.
        metrics.gatewayConnected(app: context.rows.app, platform: context.rows.platform.rawValue).increment(by: 0)
        metrics.credentialsRefused(app: context.rows.app, platform: context.rows.platform.rawValue, count: 0)
        connections: while !shutdown.isRequested {
            if let demand, isElastic, carry.isEmpty {
                // Dormant until every open connection is saturated while rows wait.
                guard await waitForDemand(demand) else { break connections }
                logger.info("The open connections are saturated: opening connection \(index)")
            } else if onDemand, carry.isEmpty {
                // Dormant until the app has rows.
                guard await waitForRows() else { break connections }
            }
            logger.info("Connecting to \(destination.endpoint)\(destination.interface)")
            if attempts > 0 { metrics.reconnects.increment() }
            attempts += 1
            // The session exists before the connection does: what it holds is never lost with a connection that
            // could not be opened, or whose closing failed.
            let session = LinkSession(.init(retry: carry))
            carry = []
            var opened = false
            do {
                try await destination.withLink { link in
                    opened = true
                    session.update { $0.connected(window: min(link.initialWindow, settings.window), limit: limit) }
                    await run(link, session: session, inFlight: inFlight)
                }
            } catch  where !opened {
                logger.error("Cannot connect to \(destination.endpoint): \(GatewayError.describe(error))")
            } catch {
                logger.warning("Closing the connection failed: \(GatewayError.describe(error))")
            }
            let (unsent, next, afterwards) = session.read { ($0.unsent, $0.nextLimit, $0.afterwards) }
            carry = unsent
            if opened { limit = next }
            switch afterwards {
            case .idle:
                logger.info(
                    isElastic
                        ? "Connection \(index) idle for \(settings.connectionIdle.formatted): closed until the others are saturated again"
                        : "Connection idle for \(settings.connectionIdle.formatted): closed until there are notifications to send"
                )
                backoff.reset()
            case .reconnect(let progressed):
                guard await Reconnect.next(&backoff, progressed: progressed, signal: signal, shutdown: shutdown, logger: logger)
                else { break connections }
            }
        }
        Reconnect.giveBack(carry, outcomes: outcomes, logger: logger)
    }

    /// Waits until the queue has unclaimed rows (true) or shutdown (false): a NOTIFY or the poll interval looks again.
    private func waitForRows() async -> Bool {
        while !shutdown.isRequested {
            let generation = signal.generation
            let looked = ContinuousClock.now
            if (try? await context.rows.hasUnclaimed()) == true { return true }
            await signal.wait(after: generation, timeout: context.pollInterval, spacedFrom: looked, by: QueueSignal.idleLookSpacing)
        }
        return false
    }

    /// Waits until `demand` wants this connection open (true) or shutdown (false): for a change of the connections
    /// below, or for the moment their saturation has lasted long enough.
    private func waitForDemand(_ demand: ConnectionDemand) async -> Bool {
        while !shutdown.isRequested {
            let (changes, stopping) = (demand.changed.generation, shutdown.requestedSignal.generation)
            let now = ContinuousClock.now
            let opensAt = demand.opensAt(index)
            if let opensAt, opensAt <= now { return true }
            await QueueSignal.wait(
                for: [(demand.changed, changes), (shutdown.requestedSignal, stopping)],
                timeout: opensAt.map { now.duration(to: $0) } ?? .seconds(60)
            )
        }
        return false
    }

    // MARK: One connection

    /// The connection's claimer, writer and reader, until the link has reported its end.
    private func run(_ link: D.Link, session: LinkSession, inFlight: Meter) async {
        logger.info("\(destination.linkOpenedLine)")
        demand?.opened(index)
        status.connectionOpened()
        let connected = metrics.gatewayConnected(app: context.rows.app, platform: context.rows.platform.rawValue)
        connected.increment()
        // The reader runs until the link's events end (every request is accounted for by then); the writer until the
        // session closes, then it waits for the answers in flight and closes the connection.
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await link.run { event in read(event, session: session) } }
            group.addTask { await write(link, session: session, inFlight: inFlight) }
            group.addTask { await claim(session: session) }
            await group.waitForAll()
        }
        connected.decrement()
        status.connectionClosed()
        demand?.closed(index)
        inFlight.set(0)
    }

    /// Asks the session what to write (``LinkSession/State/writerStep(batchSize:idleClose:stopping:now:)``) and does
    /// it, until the session says to finish.
    private func write(_ link: D.Link, session: LinkSession, inFlight: Meter) async {
        let idleClose = closesWhenIdle ? settings.connectionIdle : nil
        writing: while true {
            let wakeGeneration = session.wake.generation
            let queueGeneration = signal.generation
            // Taking rows from `ready` wakes the claimer to claim more; taking none wakes nobody (or the writer's own
            // wait would end at once).
            let (step, count, saturated) = session.update(
                { state in
                    let step = state.writerStep(
                        batchSize: settings.batchSize,
                        idleClose: idleClose,
                        stopping: shutdown.isRequested,
                        now: .now
                    )
                    return (step, state.inFlight, state.isSaturated)
                },
                wakesIf: { if case .write = $0.0 { true } else { false } }
            )
            inFlight.set(count)
            demand?.report(index, saturated: saturated)
            switch step {
            case .finish:
                break writing
            case .wait(let deadline):
                // Every change that gives the writer work wakes it (rows claimed, answers, the link closing, shutdown
                // through the queue's signal); a deadline is the idle close's moment.
                let timeout = deadline.map { max(.milliseconds(1), ContinuousClock.now.duration(to: $0)) } ?? Self.safetyWait
                await QueueSignal.wait(for: [(session.wake, wakeGeneration), (signal, queueGeneration)], timeout: timeout)
            case .write(let batch):
                // A broadcast's rows written with every stream busy and more waiting: it drains at full speed, as a full
                // claim says (``BroadcastPressure``).
                if saturated, batch.contains(where: \.bulk) { context.pressure?.atFullSpeed() }
                let (requests, unavailable) = prepare(batch)
                if requests.count < batch.count { session.update { $0.withdraw(batch.count - requests.count) } }
                // What was prepared still goes; then this connection stops (see LinkSession.State.cannotAuthenticate).
                if unavailable { session.update { $0.cannotAuthenticate() } }
                if !requests.isEmpty, await !link.send(requests.map { $0.request }) {
                    session.update { $0.notTaken(requests.map { $0.row }) }
                }
            }
        }
        // Closing: wait (bounded) for the answers to what is in flight, then hang up; what stays unanswered comes
        // back through the reader.
        let deadline = ContinuousClock.now + link.drainTimeout
        while ContinuousClock.now < deadline {
            let generation = session.wake.generation
            if session.read(\.isDrained) { break }
            // Each answer wakes it (the reader records it in the session).
            await session.wake.wait(after: generation, timeout: deadline - .now)
        }
        inFlight.set(0)
        await link.close()
    }

    /// Keeps rows claimed ahead of the free places (a window's worth, at most a claim), so sending never waits for
    /// PostgreSQL: claims of `push_batch_size` rows (more while the writer waits for them: ``ClaimSize``) run while
    /// earlier rows are on the wire. Claimed rows are held under lease by ``HeldRows`` from the moment PostgreSQL
    /// returns them.
    private func claim(session: LinkSession) async {
        var databaseBackoff = Backoff(initial: .milliseconds(200), maximum: .seconds(30))
        var size = ClaimSize(base: settings.batchSize, ceiling: settings.batchMax)
        while !shutdown.isRequested {
            let wakeGeneration = session.wake.generation
            let closingGeneration = session.closing.generation
            let queueGeneration = signal.generation
            let stoppingGeneration = shutdown.requestedSignal.generation
            let limit = size.current
            switch session.update({ $0.claimStep(batchSize: limit) }, wakesIf: { _ in false }) {
            case .stop:
                return
            case .wait:
                // The writer taking rows wakes it, as does the session closing or shutdown.
                await QueueSignal.wait(
                    for: [(session.wake, wakeGeneration), (shutdown.requestedSignal, stoppingGeneration)],
                    timeout: Self.safetyWait
                )
                continue
            case .claim:
                break
            }
            // push_broadcast_rate: this claim's share of broadcast rows. A connection for broadcast rows only waits
            // for a whole share (a tenth of a second's worth, one statement); one that claims both takes what there is
            // and claims the other rows meanwhile.
            let rate = context.rows.traffic == .interactive ? nil : context.broadcastRate
            let onlyBulk = context.rows.traffic == .bulk
            let share = rate?.share(of: limit) ?? 1
            let bulkLimit = rate?.take(upTo: limit, atLeast: onlyBulk ? share : 1)
            if let rate, bulkLimit == 0, onlyBulk {
                await session.closing.wait(after: closingGeneration, timeout: rate.wait(for: share))
                continue
            }
            let started = ContinuousClock.now
            do {
                let claim = {
                    try await context.held.claim(
                        from: context.rows,
                        limit: limit,
                        bulkLimit: bulkLimit,
                        timer: metrics.claimDuration
                    )
                }
                // A broadcast's claims take turns (``ClaimGate``); chat's go at once.
                let claimed: [QueuedNotification]
                if onlyBulk, let gate = context.broadcastClaims {
                    claimed = try await gate.run(claim)
                } else {
                    claimed = try await claim()
                }
                if let rate, let bulkLimit { rate.giveBack(bulkLimit - claimed.count { $0.bulk }) }
                // Chat first: how long a chat row took to claim paces the broadcasts (``ChatPriority``).
                if context.rows.traffic == .interactive, !claimed.isEmpty {
                    context.broadcastRate?.chatClaimed(taking: started.duration(to: .now))
                }
                databaseBackoff.reset()
                // What the writer did meanwhile sizes the next claim (``ClaimSize``).
                let waited = session.update(
                    { state in
                        state.claimed(claimed)
                        return state.writerWaited
                    },
                    wakesIf: { _ in !claimed.isEmpty }
                )
                size.claimed(count: claimed.count, asked: limit, writerWaited: waited)
                if claimed.count >= limit, claimed.contains(where: \.bulk) { context.pressure?.atFullSpeed() }
                if claimed.isEmpty {
                    // The queue is empty: wait for a NOTIFY (or the poll interval), or for this connection to end.
                    await QueueSignal.wait(
                        for: [(signal, queueGeneration), (session.closing, closingGeneration)],
                        timeout: context.pollInterval
                    )
                    continue
                }
            } catch {
                if let rate, let bulkLimit { rate.giveBack(bulkLimit) }
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
}
