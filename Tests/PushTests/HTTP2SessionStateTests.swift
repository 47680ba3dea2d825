import Testing

@testable import APNs
@testable import Push

/// The HTTP/2 connection's state without sockets: which rows go out when, and what comes back.
@Suite struct HTTP2SessionStateTests {
    static func rows(_ ids: ClosedRange<Int64>) -> [QueuedNotification] {
        ids.map { QueuedNotification(messageID: $0, deviceToken: String(repeating: "ab", count: 32), payload: "{}") }
    }

    @Test func oneStreamUntilTheServerSaysMoreThenRetriesFirstInQuarterBatches() {
        var state = HTTP2Session.State(retry: Self.rows(1...2))
        state.ready = Self.rows(3...20)
        #expect(state.nextBatch(batchSize: 100).map(\.messageID) == [1], "one stream before SETTINGS")
        #expect(state.nextBatch(batchSize: 100).isEmpty, "the one stream is busy")
        #expect(state.allow(maxStreams: 1000, window: 8) == 8, "never above push_window")
        // 7 free of 8 and a retry waits: it goes at once, with claimed rows behind it.
        #expect(state.nextBatch(batchSize: 100).map(\.messageID) == [2, 3, 4, 5, 6, 7, 8])
        #expect(state.inFlight == 8)
        state.answered(1)
        #expect(state.nextBatch(batchSize: 100).isEmpty, "1 free stream is less than a quarter (2) of 8")
        state.answered(1)
        #expect(state.nextBatch(batchSize: 100).map(\.messageID) == [9, 10])
        #expect(state.answered == 2)
    }

    @Test func unansweredRowsAreSentAgainBeforeNewOnes() {
        var state = HTTP2Session.State()
        _ = state.allow(maxStreams: 4, window: 100)
        state.ready = Self.rows(1...8)
        let first = state.nextBatch(batchSize: 100)
        #expect(first.map(\.messageID) == [1, 2, 3, 4])
        state.unanswered(Array(first.suffix(2)))
        #expect(state.inFlight == 2)
        #expect(state.nextBatch(batchSize: 100).map(\.messageID) == [3, 4])
    }

    @Test func aConnectionThatTakesNothingClosesTheSessionAndKeepsEverythingInOrder() {
        var state = HTTP2Session.State(retry: Self.rows(5...5))
        _ = state.allow(maxStreams: 10, window: 10)
        state.ready = Self.rows(1...3)
        let batch = state.nextBatch(batchSize: 100)
        state.notTaken(batch)
        #expect(!state.open)
        #expect(state.inFlight == 0)
        #expect(!state.wantsClaim(batchSize: 100), "a closed session claims nothing")
        #expect(state.unsent.map(\.messageID) == [1, 2, 3, 5], "oldest first for the next connection")
    }

    @Test func theClaimerKeepsAWindowOfRowsReady() {
        var state = HTTP2Session.State()
        _ = state.allow(maxStreams: 1000, window: 1000)
        #expect(state.wantsClaim(batchSize: 2000))
        state.ready = Self.rows(1...1000)
        #expect(!state.wantsClaim(batchSize: 2000))
        state.withdraw(0)
        #expect(state.inFlight == 0)
    }
}
