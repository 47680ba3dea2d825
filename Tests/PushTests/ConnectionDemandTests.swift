import Testing

@testable import APNs
@testable import Push

@Suite struct ConnectionDemandTests {
    @Test func theNextConnectionOpensOnlyAfterEveryOpenOneStayedSaturated() {
        var state = ConnectionDemand.State()
        let start = ContinuousClock.now
        let after = Duration.milliseconds(200)
        state.opened(1)
        #expect(!state.wants(2, now: start, after: after))
        state.report(1, saturated: true, now: start)
        #expect(!state.wants(2, now: start + .milliseconds(100), after: after), "not saturated long enough")
        #expect(state.wants(2, now: start + .milliseconds(200), after: after))
        #expect(!state.wants(3, now: start + .milliseconds(200), after: after), "2 is not open yet")
        state.opened(2)
        #expect(!state.wants(2, now: start + .seconds(1), after: after), "already open")
        #expect(!state.wants(3, now: start + .seconds(1), after: after), "2 is not saturated")
        state.report(2, saturated: true, now: start + .seconds(1))
        #expect(state.wants(3, now: start + .seconds(2), after: after))
        state.report(1, saturated: false, now: start + .seconds(2))
        #expect(!state.wants(3, now: start + .seconds(3), after: after), "1 has free streams again")
        state.closed(2)
        #expect(state.openCount == 1)
        #expect(!state.wants(1, now: start + .seconds(3), after: after), "connection 1 is never on demand")
    }

    /// A dormant connection waits for an event, not a poll: the state says when it opens if nothing changes, and
    /// which reports change anything (a saturated connection reported saturated again changes nothing).
    @Test func whenTheNextConnectionOpensAndWhichReportsChangeThat() {
        var state = ConnectionDemand.State()
        let start = ContinuousClock.now
        let after = Duration.milliseconds(200)
        state.opened(1)
        state.opened(2)
        #expect(state.opensAt(3, after: after) == nil, "nothing saturated")
        var changed = state.report(1, saturated: true, now: start)
        #expect(changed)
        changed = state.report(1, saturated: true, now: start + .milliseconds(50))
        #expect(!changed, "still saturated: no change")
        #expect(state.opensAt(3, after: after) == nil, "2 is not saturated")
        changed = state.report(2, saturated: true, now: start + .milliseconds(100))
        #expect(changed)
        #expect(state.opensAt(3, after: after) == start + .milliseconds(300), "the later of the two, plus 200 ms")
        changed = state.report(1, saturated: false, now: start + .milliseconds(150))
        #expect(changed)
        #expect(state.opensAt(3, after: after) == nil)
        changed = state.report(1, saturated: false, now: start + .milliseconds(160))
        #expect(!changed)
        changed = state.report(4, saturated: true, now: start)
        #expect(!changed, "a connection that is not open reports nothing")
    }

    @Test func aSessionIsSaturatedWhenItsStreamsAreBusyAndRowsWait() {
        let row = QueuedNotification(messageID: 1, deviceToken: String(repeating: "ab", count: 32), payload: "{}")
        var state = LinkSession.State()
        #expect(state.isIdle)
        _ = state.allow(8, window: 1000)
        state.claimed(Array(repeating: row, count: 12))
        let first = state.nextBatch(batchSize: 100)
        #expect(first.count == 8)
        #expect(state.isSaturated)
        state.answered(4)
        #expect(!state.isSaturated, "half the streams are free")
        #expect(state.nextBatch(batchSize: 100).count == 4)
        #expect(state.inFlight == 8)
        #expect(!state.isSaturated, "nothing waits")
        #expect(!state.isIdle)
        state.answered(8)
        #expect(state.isIdle)
    }
}
