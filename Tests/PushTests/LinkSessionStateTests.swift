import Testing

@testable import APNs
@testable import Push

/// A connection's state in the sender core, without sockets: which rows go out when, and what comes back.
@Suite struct LinkSessionStateTests {
    static func rows(_ ids: ClosedRange<Int64>) -> [QueuedNotification] {
        ids.map { QueuedNotification(messageID: $0, deviceToken: String(repeating: "ab", count: 32), payload: "{}") }
    }

    @Test func oneStreamUntilTheServerSaysMoreThenRetriesFirstOnceAnEighthIsFree() {
        var state = LinkSession.State(retry: Self.rows(1...2))
        state.claimed(Self.rows(3...40))
        #expect(state.nextBatch(batchSize: 100).map(\.messageID) == [1], "one stream before SETTINGS")
        #expect(state.nextBatch(batchSize: 100).isEmpty, "the one stream is busy")
        #expect(state.allow(1000, window: 16) == 16, "never above push_window")
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
        var state = LinkSession.State()
        _ = state.allow(1000, window: 1000)
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
        var state = LinkSession.State()
        _ = state.allow(100, window: 100)
        state.claimed(Self.rows(1...300))
        #expect(state.nextBatch(batchSize: 2000).count == 64, "an eighth would be 12: pieces of 64")
        #expect(state.nextBatch(batchSize: 2000).count == 36)
        #expect(state.nextBatch(batchSize: 2000).isEmpty)
    }

    /// A chat message claimed while the connection holds a broadcast's rows is written before them (its latency is the
    /// rows in flight, not the broadcast's batch).
    @Test func otherRowsAreWrittenBeforeABroadcastsRowsAlreadyHeld() {
        var state = LinkSession.State()
        _ = state.allow(10, window: 10)
        state.claimed(
            Self.rows(1...30).map { row in
                var row = row
                row.bulk = true
                return row
            }
        )
        #expect(state.nextBatch(batchSize: 100).map(\.messageID) == Array(1...10))
        state.claimed(
            Self.rows(31...32)
                + Self.rows(33...34).map { row in
                    var row = row
                    row.bulk = true
                    return row
                }
        )
        state.answered(10)
        #expect(state.nextBatch(batchSize: 100).map(\.messageID) == [31, 32] + Array(11...18))
        #expect(state.unsent.map(\.messageID) == Array(19...30) + [33, 34], "the broadcast's in their order")
    }

    @Test func unansweredRowsAreSentAgainBeforeNewOnes() {
        var state = LinkSession.State()
        _ = state.allow(4, window: 100)
        state.claimed(Self.rows(1...8))
        let first = state.nextBatch(batchSize: 100)
        #expect(first.map(\.messageID) == [1, 2, 3, 4])
        state.unanswered(Array(first.suffix(2)))
        #expect(state.inFlight == 2)
        #expect(state.nextBatch(batchSize: 100).map(\.messageID) == [3, 4])
    }

    @Test func aConnectionThatTakesNothingClosesTheSessionAndKeepsEverythingInOrder() {
        var state = LinkSession.State(retry: Self.rows(5...5))
        _ = state.allow(10, window: 10)
        state.claimed(Self.rows(1...3))
        let batch = state.nextBatch(batchSize: 100)
        state.notTaken(batch)
        #expect(!state.open)
        #expect(state.inFlight == 0)
        #expect(!state.wantsClaim(batchSize: 100), "a closed session claims nothing")
        #expect(state.unsent.map(\.messageID) == [1, 2, 3, 5], "oldest first for the next connection")
    }

    @Test func theClaimerKeepsAWindowOfRowsReady() {
        var state = LinkSession.State()
        _ = state.allow(1000, window: 1000)
        #expect(state.wantsClaim(batchSize: 2000))
        state.claimed(Self.rows(1...1000))
        #expect(!state.wantsClaim(batchSize: 2000))
        state.withdraw(0)
        #expect(state.inFlight == 0)
    }

    @Test func aWideWindowIsNotClaimedAheadWhole() {
        var state = LinkSession.State()
        state.connected(window: 100_000, limit: .max)
        #expect(state.limit == 100_000)
        state.claimed(Self.rows(1...1999))
        #expect(state.wantsClaim(batchSize: 2000), "less than a batch ready")
        state.claimed(Self.rows(2000...2000))
        #expect(!state.wantsClaim(batchSize: 2000), "a batch ahead is enough: the rest stays for other daemons")
    }

    @Test func theNextConnectionStartsByHowThisOneEnded() {
        func ended(_ ending: LinkEnding, answered: Int, lost: Int) -> Int {
            var state = LinkSession.State()
            state.connected(window: 100, limit: 40)
            state.claimed(Self.rows(1...Int64(answered + lost)))
            _ = state.nextBatch(batchSize: 1000)
            state.answered(answered)
            // 40 + answered / 2, capped by the window
            state.unanswered(Array(Self.rows(1...Int64(max(lost, 1))).prefix(lost)))
            _ = state.ended(ending)
            return state.nextLimit
        }
        // 30 answered: the limit grew to 55; 10 lost without a word: start again at half of them.
        #expect(ended(.dropped, answered: 30, lost: 10) == 5)
        #expect(ended(.dropped, answered: 0, lost: 3) == 1, "dropped before anything was answered: one at a time")
        #expect(ended(.dropped, answered: 5, lost: 0) == 42, "nothing lost: the limit stays")
        #expect(ended(.refused, answered: 0, lost: 3) == 40, "refused credentials say nothing about the far end's pace")
        #expect(ended(.stalled, answered: 0, lost: 30) == 15, "stopped reading: half of what was out")
        #expect(ended(.orderly, answered: 2, lost: 8) == 41, "an error response or GOAWAY: the limit stays")
    }

    @Test func answersGrowTheLimitUpToTheCeiling() {
        var state = LinkSession.State()
        state.connected(window: 10, limit: 2)
        state.claimed(Self.rows(1...20))
        #expect(state.nextBatch(batchSize: 100).count == 2, "slow start: the limit, not the window")
        state.answered(2)
        #expect(state.limit == 3)
        #expect(state.allow(1000, window: 10) == 10, "what the far end allows, capped by push_window")
        #expect(state.nextBatch(batchSize: 100).count == 10)
        state.answered(8)
        #expect(state.limit == 10 && state.inFlight == 2, "never past the ceiling")
    }

    @Test func credentialsRefusedAreSaidOncePerConnection() {
        var state = LinkSession.State()
        let first = state.credentialsRefused()
        let second = state.credentialsRefused()
        #expect(first && !second)
    }

    // MARK: The driver's tasks ask, the state answers

    @Test func theWriterWritesWhatIsFreeThenWaitsWithoutADeadlineOnAConnectionThatStaysOpen() {
        var state = LinkSession.State()
        state.connected(window: 4, limit: 4)
        state.claimed(Self.rows(1...6))
        let now = ContinuousClock.now
        #expect(state.writerStep(batchSize: 100, idleClose: nil, stopping: false, now: now) == .write(Self.rows(1...4)))
        #expect(state.writerStep(batchSize: 100, idleClose: nil, stopping: false, now: now) == .wait(until: nil), "the window is full")
        state.answered(4)
        #expect(state.writerStep(batchSize: 100, idleClose: nil, stopping: false, now: now) == .write(Self.rows(5...6)))
        state.answered(2)
        let later = now + .seconds(3600)
        #expect(state.writerStep(batchSize: 100, idleClose: nil, stopping: false, now: later) == .wait(until: nil), "idle, never closed")
        #expect(state.open && state.afterwards == .reconnect(progressed: true))
    }

    @Test func anOnDemandConnectionClosesAfterItsIdleTimeCountedFromTheLastWork() {
        var state = LinkSession.State()
        state.connected(window: 4, limit: 4)
        let start = ContinuousClock.now
        let idle = Duration.seconds(30)
        #expect(state.writerStep(batchSize: 100, idleClose: idle, stopping: false, now: start) == .wait(until: start + idle))
        // Work comes 10 s in: the idle time starts again once it is answered.
        state.claimed(Self.rows(1...1))
        #expect(state.writerStep(batchSize: 100, idleClose: idle, stopping: false, now: start + .seconds(10)) == .write(Self.rows(1...1)))
        #expect(
            state.writerStep(batchSize: 100, idleClose: idle, stopping: false, now: start + .seconds(40)) == .wait(until: nil),
            "a request in flight is work: no idle close"
        )
        state.answered(1)
        let answered = start + .seconds(41)
        #expect(state.writerStep(batchSize: 100, idleClose: idle, stopping: false, now: answered) == .wait(until: answered + idle))
        let stillIdle = state.writerStep(batchSize: 100, idleClose: idle, stopping: false, now: answered + .seconds(29))
        #expect(stillIdle == .wait(until: answered + idle))
        #expect(state.open)
        #expect(state.writerStep(batchSize: 100, idleClose: idle, stopping: false, now: answered + idle) == .finish)
        #expect(!state.open && state.claimStep(batchSize: 100) == .stop)
        #expect(state.afterwards == .idle, "closed for want of work: no backoff, no alarm")
    }

    @Test func shutdownFinishesTheWriterAndStopsTheClaimerWhileAnswersAreAwaited() {
        var state = LinkSession.State()
        state.connected(window: 4, limit: 4)
        state.claimed(Self.rows(1...3))
        let now = ContinuousClock.now
        #expect(state.writerStep(batchSize: 100, idleClose: nil, stopping: false, now: now) == .write(Self.rows(1...3)))
        #expect(state.claimStep(batchSize: 100) == .claim)
        state.claimed(Self.rows(4...6))
        #expect(state.writerStep(batchSize: 100, idleClose: nil, stopping: true, now: now) == .finish, "nothing more is written")
        #expect(state.claimStep(batchSize: 100) == .stop)
        #expect(!state.isDrained, "three answers awaited")
        state.answered(2)
        state.unanswered(Self.rows(3...3))
        #expect(state.isDrained)
        #expect(state.unsent.map(\.messageID) == [3, 4, 5, 6], "given back, oldest first")
        #expect(state.afterwards == .reconnect(progressed: true))
    }

    @Test func theClaimerWaitsWhileAWindowIsReady() {
        var state = LinkSession.State()
        state.connected(window: 100, limit: 100)
        #expect(state.claimStep(batchSize: 100) == .claim)
        state.claimed(Self.rows(1...100))
        #expect(state.claimStep(batchSize: 100) == .wait, "a window's worth is ready")
        #expect(state.writerStep(batchSize: 100, idleClose: nil, stopping: false, now: .now) == .write(Self.rows(1...64)))
        #expect(state.claimStep(batchSize: 100) == .claim, "the writer took some")
    }

    @Test func aWriterLeftWithoutRowsDuringAClaimIsSeenAndAFullWindowIsNot() {
        var state = LinkSession.State()
        state.connected(window: 100_000, limit: .max)
        #expect(state.claimStep(batchSize: 100) == .claim)
        state.claimed(Self.rows(1...100))
        #expect(state.writerStep(batchSize: 100, idleClose: nil, stopping: false, now: .now) == .write(Self.rows(1...100)))
        #expect(!state.writerWaited, "it had rows to write")
        #expect(state.claimStep(batchSize: 100) == .claim)
        #expect(state.writerStep(batchSize: 100, idleClose: nil, stopping: false, now: .now) == .wait(until: nil))
        #expect(state.writerWaited, "places free, nothing ready, a claim under way: the claims are the pace")
        state.claimed(Self.rows(101...200))
        #expect(state.claimStep(batchSize: 200) == .claim, "less than a claim ready")
        #expect(!state.writerWaited, "a claim that starts watches the writer anew")

        // A far end that is the slower side: its streams are all busy while rows wait; that is not the claims' fault.
        var busy = LinkSession.State()
        busy.connected(window: 10, limit: 10)
        busy.claimed(Self.rows(1...10))
        #expect(busy.writerStep(batchSize: 100, idleClose: nil, stopping: false, now: .now) == .write(Self.rows(1...10)))
        #expect(busy.claimStep(batchSize: 100) == .claim)
        #expect(busy.writerStep(batchSize: 100, idleClose: nil, stopping: false, now: .now) == .wait(until: nil))
        #expect(!busy.writerWaited, "no place free: the writer waits for answers, not for rows")
    }

    @Test func claimsGrowWhileTheWriterWaitsForThemAndShrinkWhenItDoesNot() {
        var size = ClaimSize(base: 2000, ceiling: 8000)
        #expect(size.current == 2000 && size.ceiling == 8000)
        size.claimed(count: 2000, asked: 2000, writerWaited: true)
        #expect(size.current == 4000)
        size.claimed(count: 4000, asked: 4000, writerWaited: true)
        size.claimed(count: 8000, asked: 8000, writerWaited: true)
        #expect(size.current == 8000, "never above the ceiling (push_batch_max)")
        size.claimed(count: 8000, asked: 8000, writerWaited: false)
        #expect(size.current == 4000, "the writer kept up: halved")
        size.claimed(count: 3999, asked: 4000, writerWaited: true)
        #expect(size.current == 2000, "a short claim: the backlog is gone, back to push_batch_size")
        size.claimed(count: 2000, asked: 2000, writerWaited: false)
        #expect(size.current == 2000, "never below push_batch_size")

        var off = ClaimSize(base: 2000, ceiling: 2000)
        off.claimed(count: 2000, asked: 2000, writerWaited: true)
        #expect(off.current == 2000, "push_batch_max at push_batch_size: no growth")
    }

    @Test func aConnectionWithoutProgressOrCredentialsBacksOff() {
        var dropped = LinkSession.State()
        _ = dropped.ended(.dropped)
        #expect(dropped.afterwards == .reconnect(progressed: false))
        var orderly = LinkSession.State()
        _ = orderly.ended(.orderly)
        #expect(orderly.afterwards == .reconnect(progressed: true), "GOAWAY after work: connect again at once")
        var unavailable = LinkSession.State()
        unavailable.connected(window: 4, limit: 4)
        unavailable.claimed(Self.rows(1...2))
        _ = unavailable.writerStep(batchSize: 100, idleClose: nil, stopping: false, now: .now)
        unavailable.answered(1)
        unavailable.cannotAuthenticate()
        _ = unavailable.ended(.orderly)
        #expect(unavailable.afterwards == .reconnect(progressed: false), "no claim-and-release loop without credentials")
    }
}

@Suite struct BroadcastPressureTests {
    @Test func aFullClaimOfABroadcastCountsForTwoSeconds() {
        let pressure = BroadcastPressure()
        let start = ContinuousClock.now
        #expect(!pressure.isDraining(at: start), "no claim yet")
        pressure.atFullSpeed(at: start)
        #expect(pressure.isDraining(at: start + .milliseconds(1999)))
        #expect(!pressure.isDraining(at: start + .seconds(2)), "the backlog is gone: events go at once")
    }
}
