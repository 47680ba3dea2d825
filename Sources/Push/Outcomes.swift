import APNs
import Foundation
import Logging
import NIOConcurrencyHelpers
import Observability
import Settings
import Storage
import Support

/// Results waiting to be written to the database: sent, failed, given back, invalid tokens. Workers report here
/// without waiting for PostgreSQL; ``run()`` writes them in batches (one statement per kind) and keeps them, retrying
/// with backoff, while the database is unreachable.
final class Outcomes: Sendable {
    struct Batch: Sendable {
        var sent: [Int64] = []
        var failed: [PushQueue.Failure] = []
        var released: [Int64] = []
        var invalidTokens: [PushQueue.InvalidToken] = []
        var deferred: [PushQueue.Deferral] = []

        var isEmpty: Bool { sent.isEmpty && failed.isEmpty && released.isEmpty && invalidTokens.isEmpty && deferred.isEmpty }
        var ids: [Int64] { sent + failed.map(\.messageID) + released + deferred.map(\.messageID) }

        mutating func merge(_ other: Batch) {
            sent += other.sent
            failed += other.failed
            released += other.released
            invalidTokens += other.invalidTokens
            deferred += other.deferred
        }
    }

    private let pending = NIOLockedValueBox(Batch())
    private let wake = QueueSignal()
    let queue: PushQueue
    let held: HeldRows
    let metrics: PushMetrics
    let logger: Logger

    init(queue: PushQueue, held: HeldRows, metrics: PushMetrics, logger: Logger) {
        self.queue = queue
        self.held = held
        self.metrics = metrics
        self.logger = logger
    }

    func sent(_ items: [QueuedNotification]) {
        guard !items.isEmpty else { return }
        pending.withLockedValue { $0.sent.append(contentsOf: items.map(\.messageID)) }
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
        pending.withLockedValue { batch in
            batch.failed.append(PushQueue.Failure(messageID: item.messageID, status: status, reason: reason, kind: kind))
            if let unregistered { batch.invalidTokens.append(unregistered) }
        }
        wake.signal()
    }

    func released(_ items: [QueuedNotification]) {
        guard !items.isEmpty else { return }
        pending.withLockedValue { $0.released.append(contentsOf: items.map(\.messageID)) }
        wake.signal()
    }

    /// Rows to send again after `delay` (HTTP/2 429 and 5xx), keeping the answer in the row.
    func deferred(_ item: QueuedNotification, delay: Duration, status: String, reason: String) {
        pending.withLockedValue {
            $0.deferred.append(PushQueue.Deferral(messageID: item.messageID, delay: delay, status: status, reason: reason))
        }
        wake.signal()
    }

    var isEmpty: Bool { pending.withLockedValue { $0.isEmpty } }

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

    /// One round of writes; false if the database failed (the batch is kept for the next round).
    private func flush() async -> Bool {
        let batch = pending.withLockedValue { pending in
            let batch = pending
            pending = Batch()
            return batch
        }
        guard !batch.isEmpty else { return true }
        var done = Batch()
        let start = ContinuousClock.now
        defer { metrics.markDuration.record(duration: start.duration(to: .now)) }
        do {
            try await queue.markSent(batch.sent)
            done.sent = batch.sent
            metrics.sent.increment(by: batch.sent.count)
            try await queue.markFailed(batch.failed)
            done.failed = batch.failed
            for (kind, count) in Dictionary(grouping: batch.failed, by: \.kind).mapValues(\.count) {
                metrics.failed(reason: kind, count: count)
            }
            try await queue.recordInvalidTokens(batch.invalidTokens)
            done.invalidTokens = batch.invalidTokens
            try await queue.release(batch.released)
            done.released = batch.released
            let exhausted = try await queue.postpone(batch.deferred, limit: queue.retryLimit)
            done.deferred = batch.deferred
            if exhausted > 0 {
                metrics.failed(reason: "retries_exhausted", count: exhausted)
                logger.warning(
                    "Gave up on \(exhausted) notifications after push_max_attempts attempts or push_max_age of retryable answers"
                )
            }
            held.remove(batch.ids)
            return true
        } catch {
            held.remove(done.ids)
            var rest = Batch()
            if done.sent.isEmpty { rest.sent = batch.sent }
            if done.failed.isEmpty { rest.failed = batch.failed }
            if done.invalidTokens.isEmpty { rest.invalidTokens = batch.invalidTokens }
            if done.released.isEmpty { rest.released = batch.released }
            if done.deferred.isEmpty { rest.deferred = batch.deferred }
            pending.withLockedValue { $0.merge(rest) }
            logger.error("Cannot record delivery results (\(DatabaseError.describe(error))); retrying")
            return false
        }
    }
}
