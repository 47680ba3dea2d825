import Testing

@testable import APNs
@testable import Push

/// The HTTP/2 connection's state without sockets: which rows go out when, and what comes back.
@Suite struct HTTP2SessionStateTests {
    static func rows(_ ids: ClosedRange<Int64>) -> [QueuedNotification] {
        ids.map { QueuedNotification(messageID: $0, deviceToken: String(repeating: "ab", count: 32), payload: "{}") }
    }

    @Test func oneStreamUntilTheServerSaysMoreThenRetriesFirstOnceAnEighthIsFree() {
        var state = HTTP2Session.State(retry: Self.rows(1...2))
        state.claimed(Self.rows(3...40))
        #expect(state.nextBatch(batchSize: 100).map(\.messageID) == [1], "one stream before SETTINGS")
        #expect(state.nextBatch(batchSize: 100).isEmpty, "the one stream is busy")
        #expect(state.allow(maxStreams: 1000, window: 16) == 16, "never above push_window")
        // 15 free of 16 and a retry waits: it goes at once, with claimed rows behind it.
        #expect(state.nextBatch(batchSize: 100).map(\.messageID) == Array(2...16))
        #expect(state.inFlight == 16)
        state.answered(1)
        #expect(state.nextBatch(batchSize: 100).isEmpty, "1 free stream is less than an eighth (2) of 16")
        state.answered(1)
        #expect(state.nextBatch(batchSize: 100).map(\.messageID) == [17, 18])
        #expect(state.answered == 2)
    }

    @Test func aLargeWindowIsWrittenInPiecesOfAnEighth() {
        var state = HTTP2Session.State()
        _ = state.allow(maxStreams: 1000, window: 1000)
        state.claimed(Self.rows(1...2000))
        var pieces: [[Int64]] = []
        while case let piece = state.nextBatch(batchSize: 2000), !piece.isEmpty { pieces.append(piece.map(\.messageID)) }
        #expect(pieces.map(\.count) == Array(repeating: 125, count: 8), "the window in eight pieces, not one batch")
        #expect(pieces.joined().elementsEqual(1...1000), "in order")
        state.answered(124)
        #expect(state.nextBatch(batchSize: 2000).isEmpty, "124 free streams are less than an eighth")
        state.answered(1)
        #expect(state.nextBatch(batchSize: 2000).map(\.messageID) == Array(1001...1125))
    }

    @Test func aSmallerWindowGoesInPiecesOfAtLeast64() {
        var state = HTTP2Session.State()
        _ = state.allow(maxStreams: 100, window: 100)
        state.claimed(Self.rows(1...300))
        #expect(state.nextBatch(batchSize: 2000).count == 64, "an eighth would be 12: pieces of 64")
        #expect(state.nextBatch(batchSize: 2000).count == 36)
        #expect(state.nextBatch(batchSize: 2000).isEmpty)
    }

    @Test func unansweredRowsAreSentAgainBeforeNewOnes() {
        var state = HTTP2Session.State()
        _ = state.allow(maxStreams: 4, window: 100)
        state.claimed(Self.rows(1...8))
        let first = state.nextBatch(batchSize: 100)
        #expect(first.map(\.messageID) == [1, 2, 3, 4])
        state.unanswered(Array(first.suffix(2)))
        #expect(state.inFlight == 2)
        #expect(state.nextBatch(batchSize: 100).map(\.messageID) == [3, 4])
    }

    @Test func aConnectionThatTakesNothingClosesTheSessionAndKeepsEverythingInOrder() {
        var state = HTTP2Session.State(retry: Self.rows(5...5))
        _ = state.allow(maxStreams: 10, window: 10)
        state.claimed(Self.rows(1...3))
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
        state.claimed(Self.rows(1...1000))
        #expect(!state.wantsClaim(batchSize: 2000))
        state.withdraw(0)
        #expect(state.inFlight == 0)
    }
}
