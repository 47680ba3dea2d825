import Foundation
import PostgresNIO
import Testing

@testable import Push
@testable import Storage

/// `push_broadcast_nice` reaches a broadcast lane's database requests (issue 43, item 5): the work
/// ``DatabaseClient/withConnection(_:)`` runs in a task of its own (a claim's rows decoded) runs on the lane's threads,
/// at its niceness; a request from anywhere else runs at the process's.
@Suite struct BroadcastThreadsDatabaseTests {
    /// The niceness of the thread this runs on, from /proc (field 19 of its stat line).
    static func threadNice() throws -> Int {
        let stat = try String(contentsOfFile: "/proc/thread-self/stat", encoding: .utf8)
        let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
        return try #require(Int(fields[16]))
    }

    @Test func aBroadcastLanesDatabaseRequestsRunAtItsNiceness() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await TestDatabase.withDatabaseClient(url) { database in
                let threads = BroadcastThreads(nice: 9, threads: 1)
                var inside: [Int] = []
                await threads.run {
                    for _ in 0..<5 {
                        let nice = try? await database.withConnection { connection in
                            _ = try await connection.query("SELECT 1", logger: TestDatabase.logger).collect()
                            return try Self.threadNice()
                        }
                        inside.append(nice ?? -100)
                    }
                }
                await threads.shutdown()
                let outside = try await database.withConnection { connection in
                    _ = try await connection.query("SELECT 1", logger: TestDatabase.logger).collect()
                    return try Self.threadNice()
                }
                #expect(inside == [9, 9, 9, 9, 9])
                #expect(outside == 0)
            }
        }
    }
}
