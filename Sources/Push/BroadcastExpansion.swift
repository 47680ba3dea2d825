import CoreMetrics
import Logging
import Storage

/// Expands broadcasts the API accepted into the queue, batch by batch, while the daemon drains: every daemon runs one,
/// and each batch is one statement that one daemon wins (the others' come back empty and look again).
struct BroadcastExpansion: Sendable {
    /// Rows one batch queues: small enough that a batch is a short statement (chat's rows are never queued behind it
    /// for long), large enough that a million rows take a few hundred statements.
    static let batch = 5_000

    let broadcasts: BroadcastQueue
    let context: WorkerContext

    /// Until graceful shutdown (a batch in progress finishes: it is one statement).
    func run() async {
        var failures = 0
        // Round-robin by app: each batch goes to the next app with a broadcast under way.
        var previousApp = ""
        while !context.shutdown.isRequested {
            let generation = context.signal.generation
            let looked = ContinuousClock.now
            do {
                guard let broadcast = try await broadcasts.next(after: previousApp) else {
                    failures = 0
                    await context.signal.wait(
                        after: generation,
                        timeout: context.pollInterval,
                        spacedFrom: looked,
                        by: QueueSignal.idleLookSpacing
                    )
                    continue
                }
                let result = try await broadcasts.expand(broadcast, limit: Self.batch)
                previousApp = broadcast.app
                failures = 0
                if !result.moved {
                    // Another daemon's batch holds the notification (or a cancellation came first): look again when
                    // its rows are queued (its NOTIFY), not in a loop of statements that find the row locked.
                    await context.signal.wait(after: generation, timeout: context.pollInterval)
                }
                context.metrics.broadcastExpanded.increment(by: result.queued)
                if result.done {
                    context.logger.info(
                        "Broadcast queued in full",
                        metadata: ["notification.id": "\(broadcast.id)", "push.app": "\(broadcast.app)"]
                    )
                }
            } catch {
                failures += 1
                // Logged once per outage: the database client's probe tells when it is back.
                if failures == 1 { context.logger.warning("Cannot expand broadcasts: \(DatabaseError.describe(error))") }
                await context.signal.wait(after: generation, timeout: min(context.pollInterval, .seconds(1)) * min(failures, 5))
            }
        }
    }
}
