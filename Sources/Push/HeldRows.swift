import APNs
import Metrics
import NIOConcurrencyHelpers
import Storage

/// The message ids this daemon holds (claimed and not yet settled in the database), for lease renewal.
///
/// Rows are held by the claim itself (``claim(from:limit:timer:)`` registers them the moment PostgreSQL leases them)
/// and let go when their result is recorded (``Outcomes`` removes them): no worker registers or releases by hand.
final class HeldRows: Sendable {
    private let ids = NIOLockedValueBox(Set<Int64>())

    /// Claims up to `limit` rows and holds them; `timer` records how long the claim took.
    func claim(from queue: any RowSource, limit: Int, bulkLimit: Int? = nil, timer: Metrics.Timer) async throws -> [QueuedNotification] {
        let start = ContinuousClock.now
        let rows = try await queue.claim(limit: limit, bulkLimit: bulkLimit)
        timer.record(duration: start.duration(to: .now))
        if !rows.isEmpty { add(rows.map { $0.messageID }) }
        return rows
    }

    func add<S: Sequence<Int64>>(_ new: S) { ids.withLockedValue { $0.formUnion(new) } }
    func remove<S: Sequence<Int64>>(_ done: S) { ids.withLockedValue { $0.subtract(done) } }
    var snapshot: [Int64] { ids.withLockedValue { Array($0) } }
    var count: Int { ids.withLockedValue { $0.count } }
}
