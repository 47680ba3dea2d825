import Testing

@testable import APNs
@testable import Push

/// The binary connection's window without sockets: what silence accepts, what an error response or a drop means,
/// as the events the sender core reads.
@Suite struct BinaryLinkStateTests {
    static func rows(_ ids: ClosedRange<Int64>) -> [QueuedNotification] {
        ids.map { QueuedNotification(messageID: $0, deviceToken: String(repeating: "ab", count: 32), payload: "{}") }
    }

    static func ids(_ rows: [QueuedNotification]) -> [Int64] { rows.map(\.messageID) }

    let start = ContinuousClock.now

    /// The events, flattened for comparison: `answered 1:sent 2:sent`, `unanswered 4 5`, `closed orderly`.
    static func describe(_ events: [LinkEvent]) -> [String] {
        events.map { event in
            switch event {
            case .answered(let answers):
                "answered " + answers.map { "\($0.row.messageID):\($0.verdict == .sent ? "sent" : "refused")" }.joined(separator: " ")
            case .unanswered(let rows, _): "unanswered " + rows.map { "\($0.messageID)" }.joined(separator: " ")
            case .closed(_, let ending): "closed \(ending)"
            case .window, .timedOut, .goingAway: "unexpected"
            }
        }
    }

    static func refuse(_ response: BinaryErrorResponse, _: QueuedNotification) -> Verdict {
        .failed(Verdict.Failure(status: "\(response.status.rawValue)", reason: "refused", kind: "refused"))
    }

    func written(_ ids: ClosedRange<Int64>, at instant: ContinuousClock.Instant, capacity: Int = 10) -> BinaryLinkState {
        var state = BinaryLinkState(capacity: capacity)
        let appended = state.append(Self.rows(ids))
        #expect(appended)
        state.restampLast(ids.count, at: instant)
        return state
    }

    @Test func silenceSettlesWhatWasWrittenBeforeTheInstant() {
        var state = written(1...2, at: start)
        #expect(state.settle(writtenBefore: start - .milliseconds(1), alarmRaised: false).isEmpty)
        #expect(Self.ids(state.settle(writtenBefore: start + .milliseconds(1), alarmRaised: false)) == [1, 2])
        #expect(state.inFlightCount == 0)
    }

    @Test func nothingSettlesWhileItsWriteIsUnderWayOrOnceTheGatewaySpoke() {
        var state = BinaryLinkState(capacity: 10)
        let appended = state.append(Self.rows(1...3))
        #expect(appended)
        #expect(state.settle(writtenBefore: start + .seconds(3600), alarmRaised: false).isEmpty, "the write has not completed")
        state.restampLast(3, at: start)
        let four = state.append(Self.rows(4...4))
        #expect(four)
        #expect(state.settle(writtenBefore: start + .seconds(1), alarmRaised: false).isEmpty, "a later write waits for the socket")
        state.restampLast(1, at: start + .seconds(2))
        let settled = state.settle(writtenBefore: start + .seconds(1), alarmRaised: false)
        #expect(Self.ids(settled) == [1, 2, 3])
        _ = state.append(Self.rows(5...5))
        state.restampLast(1, at: start)
        #expect(state.settle(writtenBefore: start + .seconds(1), alarmRaised: true).isEmpty, "an error response may be on its way")
    }

    @Test func anErrorResponseSplitsTheWindow() {
        var state = written(1...5, at: start)
        let end = state.end(reading: .errorResponse(BinaryErrorResponse(status: .invalidToken, identifier: 3)))
        let events = state.end(end, verdict: Self.refuse)
        #expect(Self.describe(events) == ["answered 1:sent 2:sent 3:refused", "unanswered 4 5", "closed orderly"])
        #expect(state.stopped)
        #expect(state.inFlightCount == 0)
        let appended = state.append(Self.rows(6...6))
        #expect(!appended, "nothing is written after the end")
    }

    @Test func aShutdownResponseAcceptsUpToTheIdentifierItNames() {
        var state = written(1...4, at: start)
        let events = state.end(.errorResponse(BinaryErrorResponse(status: .shutdown, identifier: 2)), verdict: Self.refuse)
        #expect(Self.describe(events) == ["answered 1:sent 2:sent", "unanswered 3 4", "closed orderly"])
    }

    @Test func anUnknownIdentifierResendsTheWholeWindow() {
        var state = written(1...3, at: start)
        let events = state.end(.errorResponse(BinaryErrorResponse(status: .processingError, identifier: 99)), verdict: Self.refuse)
        #expect(Self.describe(events) == ["unanswered 1 2 3", "closed orderly"])
    }

    @Test func aDropWithoutAWordResendsTheWindow() {
        var state = written(1...3, at: start)
        #expect(
            Self.describe(state.end(.closed("reset by peer", refused: false), verdict: Self.refuse)) == [
                "unanswered 1 2 3", "closed dropped",
            ]
        )
        var tls = BinaryLinkState(capacity: 10)
        #expect(Self.describe(tls.end(.closed("TLS handshake failed", refused: true), verdict: Self.refuse)) == ["closed refused"])
    }

    @Test func whatTheWriterAndTheDriverAskedForDecidesHowAClosedReadEnded() {
        var stalled = written(1...2, at: start)
        stalled.stalled("took no bytes")
        let appended = stalled.append(Self.rows(3...3))
        #expect(!appended, "a stalled connection takes nothing more")
        let end = stalled.end(reading: .closed("closed", refused: false))
        #expect(end == .stalled("took no bytes"))
        #expect(Self.describe(stalled.end(end, verdict: Self.refuse)) == ["unanswered 1 2", "closed stalled"])

        var drained = written(1...3, at: start)
        drained.drain()
        #expect(drained.end(reading: .closed("closed", refused: false)) == .drained)
        let error = BinaryLinkState.End.errorResponse(BinaryErrorResponse(status: .invalidToken, identifier: 2))
        #expect(drained.end(reading: error) == error, "an error response in the last moment wins")
        #expect(Self.describe(drained.end(.drained, verdict: Self.refuse)) == ["answered 1:sent 2:sent 3:sent", "closed orderly"])
    }

    /// A refused certificate (TLS 1.3 tells the client after its handshake, so rows were written) is the gateway's
    /// word: nothing was accepted, whatever the driver asked for; and a drain asked once the read had ended on its own
    /// does not count (it turned a refusal into an orderly close: the rows were stamped sent, and no backoff).
    @Test func aRefusalOrAnEndBeforeTheDrainIsNotTurnedIntoAcceptance() {
        let refused = BinaryLinkState.End.closed("the gateway refused the client certificate", refused: true)
        var drainedFirst = written(1...2, at: start)
        drainedFirst.drain()
        #expect(drainedFirst.end(reading: refused) == refused)
        #expect(Self.describe(drainedFirst.end(refused, verdict: Self.refuse)) == ["unanswered 1 2", "closed refused"])

        var endedFirst = written(1...2, at: start)
        endedFirst.stop()
        endedFirst.drain()
        endedFirst.stalled("took no bytes")
        let dropped = BinaryLinkState.End.closed("reset by peer", refused: false)
        #expect(endedFirst.end(reading: dropped) == dropped)
        #expect(Self.describe(endedFirst.end(dropped, verdict: Self.refuse)) == ["unanswered 1 2", "closed dropped"])
    }
}
