import Testing

@testable import APNs
@testable import Push

/// The binary connection's state without sockets: what is accepted by silence, by an error response, and what goes to
/// the next connection.
@Suite struct BinarySessionTests {
    static func rows(_ ids: ClosedRange<Int64>) -> [QueuedNotification] {
        ids.map { QueuedNotification(messageID: $0, deviceToken: String(repeating: "ab", count: 32), payload: "{}") }
    }

    let start = ContinuousClock.now

    @Test func silenceSettlesWhatWasWrittenBeforeTheInstantAndGrowsTheLimit() {
        let session = BinarySession(capacity: 10, limit: 2, carry: [], alarm: GatewayAlarm())
        #expect(session.freeSpace == 2, "slow start: the limit, not the capacity")
        #expect(session.append(Self.rows(1...2), at: start))
        #expect(session.freeSpace == 0)
        #expect(session.settle(writtenBefore: start - .milliseconds(1)).isEmpty)
        #expect(session.settle(writtenBefore: start + .milliseconds(1)).map(\.messageID) == [1, 2])
        #expect(session.delivered == 2)
        #expect(session.limit == 4)
        #expect(session.freeSpace == 4)
    }

    @Test func onceTheGatewaySpeaksNothingSettlesByTime() {
        let alarm = GatewayAlarm()
        let session = BinarySession(capacity: 10, limit: 10, carry: [], alarm: alarm)
        _ = session.append(Self.rows(1...3), at: start)
        alarm.raise()
        #expect(session.settle(writtenBefore: start + .seconds(1)).isEmpty, "an error response may be on its way")
    }

    static func ids(_ rows: [QueuedNotification]) -> [Int64] { rows.map(\.messageID) }

    @Test func anErrorResponseSplitsTheWindowAndHandsOverThePendingRows() {
        var state = BinarySessionState(capacity: 10, limit: 10, carry: Self.rows(10...11))
        #expect(Self.ids(state.takePending(limit: 1)) == [10])
        _ = state.append(Self.rows(1...5), at: start)
        let settlement = state.end(.errorResponse(BinaryErrorResponse(status: .invalidToken, identifier: 3)))
        #expect(Self.ids(settlement.accepted) == [1, 2])
        #expect(settlement.failed?.0.messageID == 3)
        #expect(Self.ids(settlement.carry) == [4, 5, 11], "what followed the refused one, then what was never written")
        #expect(settlement.resent == 2)
        #expect(settlement.progressed, "the gateway answered: reconnect at once")
        #expect(settlement.nextLimit == 10)
        #expect(state.stopped)
        #expect(state.delivered == 2)
        #expect(state.inFlightCount == 0)
    }

    @Test func aShutdownResponseAcceptsUpToTheIdentifierItNames() {
        var state = BinarySessionState(capacity: 10, limit: 10, carry: [])
        _ = state.append(Self.rows(1...4), at: start)
        let settlement = state.end(.errorResponse(BinaryErrorResponse(status: .shutdown, identifier: 2)))
        #expect(Self.ids(settlement.accepted) == [1, 2])
        #expect(settlement.failed == nil)
        #expect(Self.ids(settlement.carry) == [3, 4])
    }

    @Test func aDropWithoutAWordResendsTheWindowAndStartsSmallAgain() {
        var state = BinarySessionState(capacity: 100, limit: 40, carry: [])
        _ = state.append(Self.rows(1...30), at: start)
        #expect(Self.ids(state.settle(writtenBefore: start + .milliseconds(1), alarmRaised: false)).count == 30)
        _ = state.append(Self.rows(31...40), at: start + .seconds(1))
        state.addPending(Self.rows(41...42))
        let settlement = state.end(.closed("reset by peer", refused: false))
        #expect(Self.ids(settlement.carry) == Array(31...42), "the unsettled window (fate unknown), then the rest")
        #expect(settlement.resent == 10)
        #expect(settlement.nextLimit == 5, "half of what was unsettled")
        #expect(settlement.progressed, "30 were accepted")
        var silent = BinarySessionState(capacity: 100, limit: 40, carry: [])
        _ = silent.append(Self.rows(1...3), at: start)
        #expect(silent.end(.closed("reset", refused: false)).nextLimit == 1, "dropped before anything settled: one at a time")
        var refused = BinarySessionState(capacity: 100, limit: 40, carry: Self.rows(1...3))
        let tls = refused.end(.closed("TLS handshake failed", refused: true))
        #expect(tls.nextLimit == 40 && !tls.progressed && Self.ids(tls.carry) == [1, 2, 3])
    }

    @Test func aStalledGatewayHalvesTheLimit() {
        var state = BinarySessionState(capacity: 100, limit: 64, carry: [])
        _ = state.append(Self.rows(1...50), at: start)
        let settlement = state.end(.stalled("took no bytes"))
        #expect(settlement.nextLimit == 25)
        #expect(settlement.resent == 50)
        #expect(!settlement.progressed)
    }

    @Test func drainedAtShutdownAcceptsTheSilentWindowAndKeepsTheUnwritten() {
        var state = BinarySessionState(capacity: 10, limit: 10, carry: Self.rows(5...6))
        _ = state.append(Self.rows(1...3), at: start)
        let settlement = state.end(.drained)
        #expect(Self.ids(settlement.accepted) == [1, 2, 3])
        #expect(Self.ids(settlement.carry) == [5, 6], "given back to the queue by the worker")
        #expect(settlement.resent == 0)
    }

    @Test func afterTheConnectionEndsWritesWaitForTheNextOne() {
        let session = BinarySession(capacity: 10, limit: 10, carry: [], alarm: GatewayAlarm())
        _ = session.append(Self.rows(1...2), at: start)
        session.stop()
        #expect(!session.append(Self.rows(3...4), at: start), "not written: the session stopped")
        let settlement = session.end(.closed("gone", refused: false))
        #expect(Self.ids(settlement.carry) == [1, 2, 3, 4], "fate unknown: resent, then the unwritten")
        #expect(settlement.resent == 2)
        #expect(session.inFlightCount == 0)
    }
}
