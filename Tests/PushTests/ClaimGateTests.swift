import NIOConcurrencyHelpers
import Testing

@testable import APNs
@testable import Push
@testable import Settings
@testable import Storage

/// A broadcast's claims take turns (``ClaimGate``).
@Suite struct ClaimGateTests {
    /// Counts the claims running at once.
    final class Overlap: Sendable {
        private let counts = NIOLockedValueBox((now: 0, most: 0, done: [Int]()))
        func begin() {
            counts.withLockedValue {
                $0.now += 1
                $0.most = max($0.most, $0.now)
            }
        }
        func end(_ number: Int) {
            counts.withLockedValue {
                $0.now -= 1
                $0.done.append(number)
            }
        }
        var most: Int { counts.withLockedValue { $0.most } }
        var done: [Int] { counts.withLockedValue { $0.done } }
    }

    @Test func claimsBehindTheGateRunOneAtATime() async throws {
        let gate = ClaimGate()
        let overlap = Overlap()
        try await withThrowingTaskGroup(of: Int.self) { group in
            for number in 0..<8 {
                group.addTask {
                    try await gate.run {
                        overlap.begin()
                        try await Task.sleep(for: .milliseconds(5))
                        overlap.end(number)
                        return number
                    }
                }
            }
            var returned: [Int] = []
            for try await number in group { returned.append(number) }
            #expect(returned.sorted() == Array(0..<8))
        }
        #expect(overlap.most == 1)
        #expect(overlap.done.count == 8)
    }

    @Test func aClaimThatFailsLetsTheNextIn() async throws {
        struct Refused: Error {}
        let gate = ClaimGate()
        await #expect(throws: Refused.self) { try await gate.run { () async throws -> Int in throw Refused() } }
        // Not left taken: the next claim runs (a gate left taken would wait here for ever).
        let next = try await gate.run { 42 }
        #expect(next == 42)
    }

    @Test func withoutTheGateClaimsOverlap() async throws {
        // The counter itself sees overlap when nothing orders the claims (the first test could not pass by accident).
        let overlap = Overlap()
        await withTaskGroup(of: Void.self) { group in
            for number in 0..<4 {
                group.addTask {
                    overlap.begin()
                    try? await Task.sleep(for: .milliseconds(50))
                    overlap.end(number)
                }
            }
        }
        #expect(overlap.most > 1)
    }

    // MARK: In the driver

    /// A broadcast's rows in memory whose claims take a while, counted as they overlap.
    struct SlowRows: RowSource {
        let rows: MemoryRows
        let overlap: Overlap
        var app: String { rows.app }
        var platform: Platform { rows.platform }
        var traffic: PushQueue.Traffic { rows.traffic }

        func claim(limit: Int, bulkLimit: Int?) async throws -> [QueuedNotification] {
            overlap.begin()
            try? await Task.sleep(for: .milliseconds(5))
            let claimed = try await rows.claim(limit: limit, bulkLimit: bulkLimit)
            overlap.end(claimed.count)
            return claimed
        }
        func hasUnclaimed() async throws -> Bool { try await rows.hasUnclaimed() }
        func forApp(_ app: String, platform: Platform) -> SlowRows {
            SlowRows(rows: rows.forApp(app, platform: platform), overlap: overlap)
        }
        func forTraffic(_ traffic: PushQueue.Traffic) -> SlowRows { SlowRows(rows: rows.forTraffic(traffic), overlap: overlap) }
    }

    /// Three connections drain a broadcast's 3,000 rows in claims of 20: with the daemon's gate their claims never
    /// overlap, and every row is still sent once; without it (the control) they do.
    @Test(arguments: [true, false])
    func aBroadcastsConnectionsClaimInTurn(gated: Bool) async throws {
        let queue = MemoryQueue(rows: 3_000)
        let far = FarEnd()
        let overlap = Overlap()
        var settings = PushSettings()
        settings.batchSize = 20
        settings.batchMax = 20
        settings.window = 100
        try await SenderDriverTests.withDrivers(
            queue: queue,
            rows: SlowRows(rows: MemoryRows(queue: queue, traffic: .bulk), overlap: overlap),
            far: far,
            settings: settings,
            connections: 3,
            broadcastClaims: gated ? ClaimGate() : nil
        ) {
            try await SenderDriverTests.waitUntil("every row is recorded sent", within: .seconds(30)) { queue.sentCount == 3_000 }
        }
        #expect(queue.sentTimes.values.allSatisfy { $0 == 1 }, "each recorded once")
        #expect(far.connections == 3)
        if gated {
            #expect(overlap.most == 1, "one claim at a time")
        } else {
            #expect(overlap.most > 1, "the connections' claims overlap without the gate")
        }
    }
}
