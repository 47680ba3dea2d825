import Foundation
import PostgresNIO
import Synchronization
import Testing

@testable import Storage

/// Statements that take sets of the queue's rows never wait for each other in a cycle (issue 42, §4): a held-out run
/// logged `deadlock detected` between the lease keeper (`renew`) and result recording on the same rows, each
/// stalling both connections for `deadlock_timeout`. The lease keeper and the return of expired leases skip rows
/// another statement holds; results lock their rows in message id order.
@Suite struct LockOrderTests {
    static let rows = 4_000

    /// The lease keeper and the return of expired leases run in a loop while the rows' results are recorded in
    /// chunks, in answer order (not sorted), as sent, failed and deferred: no statement fails (PostgreSQL breaks a
    /// deadlock by failing one of its statements with 40P01, `deadlock detected`), and every row is recorded once.
    @Test func theLeaseKeeperAndResultRecordingNeverDeadlock() async throws {
        try await ClaimTests.withQueue(rows: Self.rows) { queue, url in
            #expect(try await queue.refreshHistoryMode(), "the template is contracted: rows move to push_history")
            // Claimed in several statements: each claim rewrites its rows, so their places in the table no longer
            // follow their message ids.
            var held: [Int64] = []
            while held.count < Self.rows { held += try await ClaimTests.ids(queue, 500) }
            #expect(held.count == Self.rows)
            let leased = held
            var generator = SystemRandomNumberGenerator()
            let chunks = stride(from: 0, to: held.count, by: 40).map {
                Array(held[$0..<min($0 + 40, held.count)].shuffled(using: &generator))
            }
            let recorded = Counter()

            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        // The lease keeper, as PushService.maintainLeases runs it (the held set in no order), until
                        // every result is recorded.
                        while recorded.value < chunks.count, !Task.isCancelled {
                            try await Self.said("renew") { try await queue.renew(leased.shuffled()) }
                            try await Self.said("reclaimExpired") { try await queue.reclaimExpired(keeping: leased.shuffled()) }
                        }
                    }
                }
                for worker in 0..<3 {
                    group.addTask {
                        for (index, chunk) in chunks.enumerated() where index % 3 == worker {
                            var results = PushQueue.Results()
                            let third = chunk.count / 3
                            results.sent = Array(chunk[..<third])
                            results.failed = chunk[third..<(2 * third)].map {
                                PushQueue.Failure(messageID: $0, status: "400", reason: "BadDeviceToken")
                            }
                            results.deferred = chunk[(2 * third)...].map {
                                PushQueue.Deferral(messageID: $0, delay: .seconds(60), status: "429", reason: "TooManyRequests")
                            }
                            _ = try await Self.said("record") { try await queue.record(results) }
                            recorded.increment()
                        }
                    }
                }
                try await group.waitForAll()
            }

            let counts = try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    """
                    SELECT (SELECT count(*) FROM push_history WHERE time_sent IS NOT NULL),
                           (SELECT count(*) FROM push_history WHERE time_failed IS NOT NULL),
                           (SELECT count(*) FROM push_queue WHERE claimed_by = 'retry-later'),
                           (SELECT count(*) FROM push_queue WHERE claimed_by <> 'retry-later' OR claimed_by IS NULL)
                    """,
                    logger: TestDatabase.logger
                ).collect().first!.decode((Int64, Int64, Int64, Int64).self)
            }
            let perKind = Int64(chunks.map { $0.count / 3 }.reduce(0, +))
            #expect(counts.0 == perKind, "sent, once each")
            #expect(counts.1 == perKind, "failed, once each")
            #expect(counts.2 == Int64(Self.rows) - 2 * perKind, "deferred, still in the queue")
            #expect(counts.3 == 0)
        }
    }

    /// `body`, its error thrown as PostgreSQL said it (`deadlock detected … [SQLSTATE 40P01]`), naming `statement`.
    @discardableResult
    static func said<T>(_ statement: String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            throw StatementFailed(description: "\(statement): \(DatabaseError.describe(error))")
        }
    }

    struct StatementFailed: Error, CustomStringConvertible {
        let description: String
    }

    final class Counter: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func increment() { count.withLock { $0 += 1 } }
    }
}
