import Logging
import NIOConcurrencyHelpers
import Testing

@testable import APNs
@testable import Observability
@testable import Push
@testable import Storage

/// Recording results: a batch is recorded whole or kept whole for the next round, and rows stay held (their
/// leases renewed) until their batch is recorded.
@Suite struct OutcomesTests {
    /// Fails the first `failures` calls (as a database that is away), then records.
    final class MemoryRecorder: ResultRecorder {
        private let state: NIOLockedValueBox<(failures: Int, recorded: [PushQueue.Results])>

        init(failures: Int) { state = NIOLockedValueBox((failures, [])) }

        var recorded: [PushQueue.Results] { state.withLockedValue { $0.recorded } }

        func record(_ results: PushQueue.Results) async throws -> Int {
            try state.withLockedValue { state in
                if state.failures > 0 {
                    state.failures -= 1
                    throw DatabaseError(code: .unavailable, context: "recording", reason: "the database is away")
                }
                state.recorded.append(results)
                return results.deferred.count { $0.reason == "give up" }
            }
        }
    }

    static func row(_ id: Int64) -> QueuedNotification {
        QueuedNotification(messageID: id, deviceToken: String(repeating: "ab", count: 32), payload: "{}")
    }

    static func outcomes(_ recorder: MemoryRecorder, held: HeldRows) -> (Outcomes, PushMetrics) {
        let metrics = PushMetrics(registry: MetricsRegistry())
        return (Outcomes(recorder: recorder, held: held, metrics: metrics, logger: Logger(label: "test")), metrics)
    }

    @Test func aBatchThatFailsIsKeptWholeAndRecordedWholeLater() async {
        let recorder = MemoryRecorder(failures: 1)
        let held = HeldRows()
        held.add([1, 2, 3, 4, 5])
        let (outcomes, _) = Self.outcomes(recorder, held: held)
        outcomes.sent([Self.row(1), Self.row(2)])
        outcomes.failed(Self.row(3), status: "8", reason: "invalid token", kind: "invalid_token")
        outcomes.released([Self.row(4)])
        outcomes.deferred(Self.row(5), delay: .seconds(2), status: "503", reason: "give up")
        #expect(await outcomes.flush() == false)
        #expect(recorder.recorded.isEmpty)
        #expect(Set(held.snapshot) == [1, 2, 3, 4, 5], "still held: their leases are still renewed")
        #expect(outcomes.isEmpty == false)
        outcomes.sent([Self.row(6)])
        #expect(await outcomes.flush() == true)
        let recorded = recorder.recorded
        #expect(recorded.count == 1, "one batch: what failed and what came since")
        #expect(Set(recorded.first?.sent ?? []) == [1, 2, 6])
        #expect(recorded.first?.failed.map(\.messageID) == [3])
        #expect(recorded.first?.released == [4])
        #expect(recorded.first?.deferred.map(\.messageID) == [5])
        #expect(held.snapshot.isEmpty)
        #expect(outcomes.isEmpty)
    }

    @Test func rowsAreLetGoOnlyOnceTheirBatchIsRecorded() async {
        let recorder = MemoryRecorder(failures: 0)
        let held = HeldRows()
        held.add([1, 2])
        let (outcomes, _) = Self.outcomes(recorder, held: held)
        outcomes.sent([Self.row(1)])
        #expect(Set(held.snapshot) == [1, 2], "reported, not yet recorded")
        #expect(await outcomes.flush())
        #expect(held.snapshot == [2])
    }

    @Test func drainRetriesUntilRecordedWithinItsTime() async {
        let recorder = MemoryRecorder(failures: 2)
        let held = HeldRows()
        held.add([7])
        let (outcomes, _) = Self.outcomes(recorder, held: held)
        outcomes.released([Self.row(7)])
        await outcomes.drain(timeout: .seconds(5))
        #expect(recorder.recorded.map(\.released) == [[7]])
        #expect(held.snapshot.isEmpty)
    }
}
