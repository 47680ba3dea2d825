import APNs
import CoreMetrics
import Foundation
import Logging
import Metrics
import NIOConcurrencyHelpers
import Observability
import Settings
import Storage
import Support

/// Where a batch of results goes: ``PushQueue/record(_:)`` (one statement or one transaction), or a test's store.
protocol ResultRecorder: Sendable {
    /// Records the batch whole or not at all; how many deferred rows were failed instead.
    func record(_ results: PushQueue.Results) async throws -> Int
}

extension PushQueue: ResultRecorder {}

/// Results waiting to be written to the database: sent, failed, given back, invalid tokens. Workers report here
/// without waiting for PostgreSQL; ``run()`` records them a batch at a time (whole or not at all) and keeps a batch
/// that failed, retrying with backoff, while the database is unreachable.
final class Outcomes: Sendable {
    typealias Batch = PushQueue.Results

    /// Sent and failed rows by app, for the per-app counters: recorded with their batch.
    struct AppCounts: Sendable, Equatable {
        var sent = 0
        var failed = 0
    }

    private let pending = NIOLockedValueBox((batch: Batch(), byApp: [String: AppCounts]()))
    private let wake = QueueSignal()
    let recorder: any ResultRecorder
    let held: HeldRows
    let metrics: PushMetrics
    let logger: Logger

    init(recorder: any ResultRecorder, held: HeldRows, metrics: PushMetrics, logger: Logger) {
        self.recorder = recorder
        self.held = held
        self.metrics = metrics
        self.logger = logger
    }

    func sent(_ items: [QueuedNotification]) {
        guard !items.isEmpty else { return }
        // Counted outside the lock, by runs: an answered batch is one app's (one connection), so this is one entry.
        var byApp: [(app: String?, count: Int)] = []
        for item in items {
            if let last = byApp.indices.last, byApp[last].app == item.app { byApp[last].count += 1 } else { byApp.append((item.app, 1)) }
        }
        pending.withLockedValue { pending in
            pending.batch.sent.append(contentsOf: items.map { $0.messageID })
            for (app, count) in byApp { pending.byApp[app ?? App.defaultName, default: AppCounts()].sent += count }
        }
        wake.signal()
    }

    /// A row failed for good; `kind` labels the metric. `unregistered`: Apple said to stop sending to its token
    /// (HTTP/2 410), recorded for the feedback job; nothing else ever leads to deleting a user.
    func failed(
        _ item: QueuedNotification,
        status: String,
        reason: String,
        kind: String,
        unregistered: PushQueue.InvalidToken? = nil
    ) {
        pending.withLockedValue { pending in
            pending.batch.failed.append(PushQueue.Failure(messageID: item.messageID, status: status, reason: reason, kind: kind))
            if let unregistered { pending.batch.invalidTokens.append(unregistered) }
            pending.byApp[item.app ?? App.defaultName, default: AppCounts()].failed += 1
        }
        wake.signal()
    }

    func released(_ items: [QueuedNotification]) {
        guard !items.isEmpty else { return }
        pending.withLockedValue { $0.batch.released.append(contentsOf: items.map { $0.messageID }) }
        wake.signal()
    }

    /// Rows to send again after `delay` (HTTP/2 429 and 5xx), keeping the answer in the row.
    func deferred(_ item: QueuedNotification, delay: Duration, status: String, reason: String, growing: Bool = false) {
        pending.withLockedValue {
            $0.batch.deferred.append(
                PushQueue.Deferral(messageID: item.messageID, delay: delay, status: status, reason: reason, growing: growing)
            )
        }
        wake.signal()
    }

    var isEmpty: Bool { pending.withLockedValue { $0.batch.isEmpty } }

    /// Writes results as they come, until cancelled. A round under way when cancelled completes first, so its
    /// batch is neither lost nor left for ``drain(timeout:)`` to miss.
    func run() async {
        var backoff = Backoff(initial: .milliseconds(200), maximum: .seconds(10))
        while !Task.isCancelled {
            let generation = wake.generation
            if await Task(operation: { await self.flush() }).value {
                backoff.reset()
                await wake.wait(after: generation, timeout: .seconds(1))
            } else {
                try? await Task.sleep(for: backoff.next())
            }
        }
    }

    /// Writes everything pending, retrying until `timeout` (shutdown).
    func drain(timeout: Duration) async {
        let deadline = ContinuousClock.now + timeout
        while !isEmpty && ContinuousClock.now < deadline {
            if await !flush() { try? await Task.sleep(for: .milliseconds(200)) }
        }
        if !isEmpty {
            logger.error(
                "Could not record every result before stopping: the database is unreachable; leases will return those rows to the queue"
            )
        }
    }

    /// One round of writes; false if the database failed (the batch is kept, whole, for the next round).
    func flush() async -> Bool {
        let (batch, byApp) = pending.withLockedValue { pending in
            let taken = pending
            pending = (Batch(), [:])
            return taken
        }
        guard !batch.isEmpty else { return true }
        let start = ContinuousClock.now
        defer { metrics.markDuration.record(duration: start.duration(to: .now)) }
        let exhausted: Int
        do {
            exhausted = try await recorder.record(batch)
        } catch {
            // Nothing of it was recorded (or, if the answer was lost, recording it again changes nothing).
            pending.withLockedValue { pending in
                pending.batch.merge(batch)
                pending.byApp.merge(byApp) { AppCounts(sent: $0.sent + $1.sent, failed: $0.failed + $1.failed) }
            }
            logger.error("Cannot record delivery results (\(DatabaseError.describe(error))); retrying")
            return false
        }
        metrics.sent.increment(by: batch.sent.count)
        metrics.recorded(byApp: byApp)
        for (kind, count) in Dictionary(grouping: batch.failed, by: \.kind).mapValues(\.count) {
            metrics.failed(reason: kind, count: count)
        }
        if exhausted > 0 {
            metrics.failed(reason: "retries_exhausted", count: exhausted)
            logger.warning("Gave up on \(exhausted) notifications after push_max_attempts attempts or push_max_age of retryable answers")
        }
        held.remove(batch.ids)
        return true
    }
}
