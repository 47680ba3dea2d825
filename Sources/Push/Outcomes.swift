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

    private let pending = NIOLockedValueBox(Batch())
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

    /// One round of writes; false if the database failed (the batch is kept, whole, for the next round).
    func flush() async -> Bool {
        let batch = pending.withLockedValue { pending in
            let batch = pending
            pending = Batch()
            return batch
        }
        guard !batch.isEmpty else { return true }
        let start = ContinuousClock.now
        defer { metrics.markDuration.record(duration: start.duration(to: .now)) }
        let exhausted: Int
        do {
            exhausted = try await recorder.record(batch)
        } catch {
            // Nothing of it was recorded (or, if the answer was lost, recording it again changes nothing).
            pending.withLockedValue { $0.merge(batch) }
            logger.error("Cannot record delivery results (\(DatabaseError.describe(error))); retrying")
            return false
        }
        metrics.sent.increment(by: batch.sent.count)
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
