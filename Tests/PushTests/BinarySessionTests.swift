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

    @Test func anErrorResponseSplitsTheWindowAndHandsOverThePendingRows() {
        let session = BinarySession(capacity: 10, limit: 10, carry: Self.rows(10...11), alarm: GatewayAlarm())
        #expect(session.takePending(limit: 1).map(\.messageID) == [10])
        _ = session.append(Self.rows(1...5), at: start)
        let (resolution, pending) = session.resolve(BinaryErrorResponse(status: .invalidToken, identifier: 3))
        #expect(resolution.accepted.map(\.messageID) == [1, 2])
        #expect(resolution.failed?.messageID == 3)
        #expect(resolution.resend.map(\.messageID) == [4, 5])
        #expect(pending.map(\.messageID) == [11])
        #expect(session.isStopped)
        #expect(session.delivered == 2)
    }

    @Test func afterTheConnectionEndsWritesWaitForTheNextOne() {
        let session = BinarySession(capacity: 10, limit: 10, carry: [], alarm: GatewayAlarm())
        _ = session.append(Self.rows(1...2), at: start)
        session.stop()
        #expect(!session.append(Self.rows(3...4), at: start), "not written: the session stopped")
        let (window, pending) = session.takeAll()
        #expect(window.map(\.messageID) == [1, 2], "fate unknown: resent")
        #expect(pending.map(\.messageID) == [3, 4])
        #expect(session.inFlightCount == 0)
    }
}
