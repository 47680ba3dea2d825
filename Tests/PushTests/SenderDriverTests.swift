import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import APNs
@testable import Observability
@testable import Push
@testable import Settings
@testable import Storage

/// The driver every destination runs on, without PostgreSQL or a network: a queue in memory (``MemoryQueue``: claims,
/// and the results as PostgreSQL would record them) and a far end in memory (``FarEnd``, a destination whose
/// connections answer, drop or refuse as each test says).
@Suite struct SenderDriverTests {
    // MARK: Every row once

    @Test func everyRowIsSentAndRecordedOnce() async throws {
        let queue = MemoryQueue(rows: 500)
        let far = FarEnd()
        try await Self.withDriver(queue: queue, far: far) {
            try await Self.waitUntil("every row is recorded sent") { queue.sentCount == 500 }
        }
        #expect(queue.sentTimes.values.allSatisfy { $0 == 1 } && queue.sentTimes.count == 500, "each recorded once")
        #expect(far.arrivals.values.allSatisfy { $0 == 1 } && far.arrivals.count == 500, "each arrived once")
        #expect(far.connections == 1)
        #expect(queue.pendingCount == 0 && queue.claimedCount == 0)
    }

    // MARK: A dying link

    /// The connection drops after 50 rows arrived: what it left unanswered goes first on the next connection, and
    /// nothing is recorded twice.
    @Test func aDroppedConnectionsUnansweredRowsGoFirstOnTheNext() async throws {
        let queue = MemoryQueue(rows: 300)
        let far = FarEnd { connection in connection == 1 ? .dropAfter(50) : .answer }
        try await Self.withDriver(queue: queue, far: far) {
            try await Self.waitUntil("every row is recorded sent") { queue.sentCount == 300 }
        }
        #expect(far.connections == 2)
        #expect(queue.sentTimes.count == 300 && queue.sentTimes.values.allSatisfy { $0 == 1 })
        let unanswered = far.unanswered(on: 1)
        #expect(!unanswered.isEmpty, "the drop left rows unanswered")
        #expect(Array(far.order(on: 2).prefix(unanswered.count)) == unanswered, "sent again first, in order")
        #expect(far.arrivals.values.allSatisfy { $0 == 1 }, "a row unanswered had not arrived: it arrives once")
    }

    /// A connection that cannot be opened is tried again (after the backoff); nothing is claimed and lost meanwhile.
    @Test func aConnectionThatCannotOpenIsTriedAgain() async throws {
        let queue = MemoryQueue(rows: 20)
        let far = FarEnd { connection in connection == 1 ? .refuse : .answer }
        try await Self.withDriver(queue: queue, far: far) {
            try await Self.waitUntil("every row is recorded sent", within: .seconds(10)) { queue.sentCount == 20 }
        }
        #expect(far.connections == 2)
        #expect(queue.sentTimes.values.allSatisfy { $0 == 1 })
    }

    // MARK: Retries

    /// `.again` sends the row again at once on the same connection, and it is recorded once, when it is accepted.
    @Test func againSendsTheRowAgainAndRecordsItOnce() async throws {
        let queue = MemoryQueue(rows: 10)
        let far = FarEnd(verdict: { row, arrival in
            row.messageID == 3 && arrival == 1 ? .again(reason: "a fresh token", countsAsRetry: false) : .sent
        })
        try await Self.withDriver(queue: queue, far: far) {
            try await Self.waitUntil("every row is recorded sent") { queue.sentCount == 10 }
        }
        #expect(far.arrivals[3] == 2, "row 3 went twice")
        #expect(far.connections == 1)
        #expect(queue.sentTimes[3] == 1)
    }

    /// A row failed for good is recorded failed once, with its reason, and never sent again.
    @Test func aFailedRowIsRecordedFailedAndNotSentAgain() async throws {
        let queue = MemoryQueue(rows: 10)
        let far = FarEnd(verdict: { row, _ in
            row.messageID == 4 ? .failed(Verdict.Failure(status: "400", reason: "BadDeviceToken", kind: "BadDeviceToken")) : .sent
        })
        try await Self.withDriver(queue: queue, far: far) {
            try await Self.waitUntil("every row is settled") { queue.sentCount == 9 && queue.failed.count == 1 }
        }
        #expect(queue.failed.map(\.messageID) == [4] && queue.failed.first?.reason == "BadDeviceToken")
        #expect(far.arrivals[4] == 1)
    }

    // MARK: Shutdown

    /// At shutdown the driver stops sending, waits (bounded) for the answers in flight, and gives back what stayed
    /// unanswered and what it had claimed ahead: nothing recorded sent that was not answered, nothing kept.
    @Test func shutdownGivesBackWhatWasNotAnswered() async throws {
        let queue = MemoryQueue(rows: 200)
        let far = FarEnd { _ in .silent }
        try await Self.withDriver(queue: queue, far: far) {
            try await Self.waitUntil("rows arrived") { far.arrivals.count > 0 }
        }
        #expect(queue.sentCount == 0)
        #expect(queue.claimedCount == 0, "nothing stays claimed")
        #expect(queue.pendingCount == 200, "every row is back in the queue")
        #expect(queue.released.count > 0)
    }

    // MARK: The harness

    /// Runs one driver on `queue` and `far` while `body` runs, then shuts it down and writes every result.
    static func withDriver(
        queue: MemoryQueue,
        far: FarEnd,
        _ body: () async throws -> Void
    ) async throws {
        var settings = PushSettings()
        settings.batchSize = 50
        settings.window = 100
        try await withDrivers(queue: queue, rows: MemoryRows(queue: queue), far: far, settings: settings, body)
    }

    /// Runs `connections` drivers claiming from `rows` (rows of `queue`), each a connection to `far`, while `body`
    /// runs, then shuts them down and writes every result. `broadcastClaims`: the daemon's gate for bulk claims.
    static func withDrivers(
        queue: MemoryQueue,
        rows: any RowSource,
        far: FarEnd,
        settings: PushSettings,
        connections: Int = 1,
        broadcastClaims: ClaimGate? = nil,
        _ body: () async throws -> Void
    ) async throws {
        let signal = QueueSignal()
        let held = HeldRows()
        let metrics = PushMetrics(registry: MetricsRegistry())
        let logger = Logger(label: "driver-test")
        let outcomes = Outcomes(recorder: queue, held: held, metrics: metrics, logger: logger)
        let shutdown = ShutdownFlag(signal: signal)
        let context = WorkerContext(
            settings: settings,
            pollInterval: .milliseconds(100),
            rows: rows,
            outcomes: outcomes,
            held: held,
            signal: signal,
            shutdown: shutdown,
            metrics: metrics,
            status: PushStatus(),
            logger: logger,
            broadcastClaims: broadcastClaims
        )
        let drivers = (1...connections).map {
            SenderDriver(context: context, destination: MemoryDestination(far: far), index: $0, logger: logger)
        }
        let recording = Task { await outcomes.run() }
        let running = drivers.map { driver in Task { await driver.run() } }
        var failure: (any Error)?
        do {
            try await body()
        } catch {
            failure = error
        }
        shutdown.request()
        for task in running { await task.value }
        recording.cancel()
        await recording.value
        if let failure { throw failure }
        await outcomes.drain(timeout: .seconds(5))
        #expect(held.count == 0, "every row the drivers claimed is settled")
    }

    static func waitUntil(
        _ what: String,
        within limit: Duration = .seconds(5),
        _ condition: () -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + limit
        while !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("not within \(limit): \(what)")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

// MARK: - The queue in memory

/// Rows waiting, claimed and settled, as `push_queue` keeps them: a claim takes the oldest unclaimed rows, a result
/// settles a claimed row (sent, failed) or gives it back (released, deferred).
final class MemoryQueue: ResultRecorder {
    struct State {
        var pending: [QueuedNotification]
        var claimed: [Int64: QueuedNotification] = [:]
        var sentTimes: [Int64: Int] = [:]
        var failed: [PushQueue.Failure] = []
        var released: [Int64] = []
    }

    private let state: NIOLockedValueBox<State>

    init(rows count: Int) {
        let rows = (1...Int64(count)).map {
            QueuedNotification(messageID: $0, deviceToken: String(repeating: "ab", count: 32), payload: "{}")
        }
        state = NIOLockedValueBox(State(pending: rows))
    }

    var sentTimes: [Int64: Int] { state.withLockedValue { $0.sentTimes } }
    var sentCount: Int { state.withLockedValue { $0.sentTimes.count } }
    var failed: [PushQueue.Failure] { state.withLockedValue { $0.failed } }
    var released: [Int64] { state.withLockedValue { $0.released } }
    var pendingCount: Int { state.withLockedValue { $0.pending.count } }
    var claimedCount: Int { state.withLockedValue { $0.claimed.count } }

    func claim(limit: Int) -> [QueuedNotification] {
        state.withLockedValue { state in
            let taken = Array(state.pending.prefix(limit))
            state.pending.removeFirst(taken.count)
            for row in taken { state.claimed[row.messageID] = row }
            return taken
        }
    }

    func record(_ results: PushQueue.Results) async throws -> Int {
        state.withLockedValue { state in
            for id in results.sent {
                precondition(state.claimed.removeValue(forKey: id) != nil, "row \(id) recorded sent without being claimed")
                state.sentTimes[id, default: 0] += 1
            }
            for failure in results.failed {
                precondition(state.claimed.removeValue(forKey: failure.messageID) != nil, "row \(failure.messageID) failed unclaimed")
                state.failed.append(failure)
            }
            for id in results.released + results.deferred.map(\.messageID) {
                guard let row = state.claimed.removeValue(forKey: id) else { preconditionFailure("row \(id) given back unclaimed") }
                state.released.append(id)
                state.pending.append(row)
            }
            state.pending.sort { $0.messageID < $1.messageID }
            return 0
        }
    }
}

/// The driver's view of a ``MemoryQueue``.
struct MemoryRows: RowSource {
    let queue: MemoryQueue
    var app = App.defaultName
    var platform = Platform.apns
    var traffic = PushQueue.Traffic.all

    func claim(limit: Int, bulkLimit: Int?) async throws -> [QueuedNotification] { queue.claim(limit: limit) }
    func hasUnclaimed() async throws -> Bool { queue.pendingCount > 0 }

    func forApp(_ app: String, platform: Platform) -> MemoryRows {
        var rows = self
        rows.app = app
        rows.platform = platform
        return rows
    }

    func forTraffic(_ traffic: PushQueue.Traffic) -> MemoryRows {
        var rows = self
        rows.traffic = traffic
        return rows
    }
}

// MARK: - The far end in memory

/// What the far end does on one connection.
enum ConnectionPlan: Sendable {
    /// Answers every request with the far end's verdict.
    case answer
    /// Answers the first `count` requests that arrive, then drops: the rest it was written are unanswered.
    case dropAfter(Int)
    /// The connection cannot be opened.
    case refuse
    /// Takes every request and never answers (until the driver closes the connection).
    case silent
}

/// A destination's far end: counts its connections and what arrived on each, and answers as told.
final class FarEnd: Sendable {
    struct State {
        var connections = 0
        var arrivals: [Int64: Int] = [:]
        var order: [Int: [Int64]] = [:]
        var unanswered: [Int: [Int64]] = [:]
    }

    let plan: @Sendable (_ connection: Int) -> ConnectionPlan
    /// The verdict on a row's `arrival`th arrival.
    let verdict: @Sendable (_ row: QueuedNotification, _ arrival: Int) -> Verdict
    private let state = NIOLockedValueBox(State())

    init(
        plan: @escaping @Sendable (Int) -> ConnectionPlan = { _ in .answer },
        verdict: @escaping @Sendable (QueuedNotification, Int) -> Verdict = { _, _ in .sent }
    ) {
        self.plan = plan
        self.verdict = verdict
    }

    var connections: Int { state.withLockedValue { $0.connections } }
    var arrivals: [Int64: Int] { state.withLockedValue { $0.arrivals } }
    func order(on connection: Int) -> [Int64] { state.withLockedValue { $0.order[connection] ?? [] } }
    func unanswered(on connection: Int) -> [Int64] { state.withLockedValue { $0.unanswered[connection] ?? [] } }

    func open() -> (number: Int, plan: ConnectionPlan) {
        let number = state.withLockedValue { state in
            state.connections += 1
            return state.connections
        }
        return (number, plan(number))
    }

    /// A request arrived on `connection`: its arrival count.
    func arrived(_ row: QueuedNotification, on connection: Int) -> Int {
        state.withLockedValue { state in
            state.arrivals[row.messageID, default: 0] += 1
            state.order[connection, default: []].append(row.messageID)
            return state.arrivals[row.messageID]!
        }
    }

    func leftUnanswered(_ rows: [QueuedNotification], on connection: Int) {
        state.withLockedValue { $0.unanswered[connection, default: []] += rows.map(\.messageID) }
    }
}

struct FarEndRefused: Error {}

/// A ``Destination`` whose requests are the rows themselves, sent to a ``FarEnd``.
struct MemoryDestination: Destination {
    let far: FarEnd

    var endpoint: String { "memory" }
    var interface: String { "" }

    func withLink<Result: Sendable>(_ body: (MemoryLink) async -> Result) async throws -> Result {
        let (number, plan) = far.open()
        if case .refuse = plan { throw FarEndRefused() }
        let link = MemoryLink(far: far, number: number, plan: plan)
        return await body(link)
    }

    func encode(_ row: QueuedNotification, now: Date) -> Encoding<QueuedNotification> { .request(row) }
}

/// One connection to a ``FarEnd``: what `send` writes is answered (or not) through the events `run` reports.
final class MemoryLink: DestinationLink {
    struct State {
        var ended = false
        var answered = 0
        var inFlight: [Int64: QueuedNotification] = [:]
    }

    let far: FarEnd
    let number: Int
    let plan: ConnectionPlan
    private let state = NIOLockedValueBox(State())
    private let events: AsyncStream<LinkEvent>
    private let continuation: AsyncStream<LinkEvent>.Continuation

    init(far: FarEnd, number: Int, plan: ConnectionPlan) {
        self.far = far
        self.number = number
        self.plan = plan
        (events, continuation) = AsyncStream.makeStream(of: LinkEvent.self)
    }

    var initialWindow: Int { 100 }
    var drainTimeout: Duration { .milliseconds(300) }

    func run(_ report: @escaping @Sendable (LinkEvent) -> Void) async {
        for await event in events { report(event) }
    }

    func send(_ requests: [QueuedNotification]) async -> Bool {
        state.withLockedValue { state in
            guard !state.ended else { return false }
            var answers: [Answer] = []
            for (offset, row) in requests.enumerated() {
                if case .dropAfter(let count) = plan, state.answered >= count {
                    // Dropped: this request and the rest never arrived; what was in flight is unanswered too.
                    let unanswered = Array(state.inFlight.values).sorted { $0.messageID < $1.messageID } + requests[offset...]
                    if !answers.isEmpty { continuation.yield(.answered(answers)) }
                    far.leftUnanswered(unanswered, on: number)
                    continuation.yield(.unanswered(unanswered, reason: "dropped"))
                    continuation.yield(.closed("dropped", .dropped))
                    continuation.finish()
                    state.ended = true
                    return true
                }
                let arrival = far.arrived(row, on: number)
                if case .silent = plan {
                    state.inFlight[row.messageID] = row
                    continue
                }
                state.answered += 1
                answers.append(Answer(row, far.verdict(row, arrival)))
            }
            if !answers.isEmpty { continuation.yield(.answered(answers)) }
            return true
        }
    }

    func close() async {
        state.withLockedValue { state in
            guard !state.ended else { return }
            state.ended = true
            let unanswered = state.inFlight.values.sorted { $0.messageID < $1.messageID }
            if !unanswered.isEmpty { continuation.yield(.unanswered(unanswered, reason: "closed")) }
            continuation.yield(.closed("closed by the driver", .orderly))
            continuation.finish()
        }
    }
}
