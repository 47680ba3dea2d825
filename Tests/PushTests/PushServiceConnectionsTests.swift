import Testing

@testable import Push

/// Which push services' connections a Web Push link keeps (``PushServiceConnections``), apart from I/O: handles are
/// names, requests are strings.
@Suite struct PushServiceConnectionsTests {
    typealias Connections = PushServiceConnections<String, String>

    /// Opens `origin`'s connection as the link does: the first request opens it, it is open with what waited.
    static func open(_ state: inout Connections, _ origin: String, at now: ContinuousClock.Instant) -> (id: Int, closing: [String]) {
        guard case .open(let closing) = state.send(origin, ["r"], count: 1, now: now) else {
            Issue.record("\(origin) was not opened")
            return (0, [])
        }
        guard case .use(let id, let waiting) = state.opened(origin, "conn-\(origin)", now: now, count: \.count) else {
            Issue.record("\(origin) was not used")
            return (0, closing)
        }
        #expect(waiting == ["r"])
        return (id, closing)
    }

    @Test func requestsWaitForTheirOriginsConnectionThenGoOnIt() {
        var state = Connections(limit: 4, idle: .seconds(30))
        let now = ContinuousClock.now
        guard case .open(let closing) = state.send("https://a", ["1"], count: 1, now: now) else {
            Issue.record("not opened")
            return
        }
        #expect(closing.isEmpty)
        guard case .queued = state.send("https://a", ["2", "3"], count: 2, now: now) else {
            Issue.record("not queued behind the opening")
            return
        }
        guard case .use(let id, let waiting) = state.opened("https://a", "A", now: now, count: \.count) else {
            Issue.record("not used")
            return
        }
        #expect(waiting == ["1", "2", "3"])
        guard case .write(let written, let handle) = state.send("https://a", ["4"], count: 1, now: now) else {
            Issue.record("not written on the open connection")
            return
        }
        #expect(written == id && handle == "A")
        guard case .open(let open) = state.origins["https://a"] else {
            Issue.record("not open")
            return
        }
        #expect(open.inFlight == 4)
        #expect(state.parts == 1)
    }

    @Test func aConnectionIdleForTheIdleTimeWithNothingInFlightCloses() {
        var state = Connections(limit: 4, idle: .seconds(30))
        let start = ContinuousClock.now
        let a = Self.open(&state, "https://a", at: start)
        let b = Self.open(&state, "https://b", at: start)
        state.settled("https://a", id: a.id, count: 1, now: start + .seconds(1))
        #expect(state.idleConnections(now: start + .seconds(30)).isEmpty, "a was answered 29 s ago; b has a request in flight")
        #expect(state.idleConnections(now: start + .seconds(31)) == ["conn-https://a"])
        #expect(state.idleConnections(now: start + .seconds(300)).isEmpty, "b's request is still in flight")
        state.settled("https://b", id: b.id, count: 1, now: start + .seconds(300))
        #expect(state.idleConnections(now: start + .seconds(330)) == ["conn-https://b"])
        #expect(state.openCount == 0)
        // The next request for a closed origin opens a new connection.
        guard case .open = state.send("https://a", ["again"], count: 1, now: start + .seconds(400)) else {
            Issue.record("a was not opened again")
            return
        }
    }

    @Test func overTheLimitTheLeastRecentlyUsedIdleConnectionClosesFirst() {
        var state = Connections(limit: 2, idle: .seconds(30))
        let start = ContinuousClock.now
        let a = Self.open(&state, "https://a", at: start)
        let b = Self.open(&state, "https://b", at: start + .seconds(1))
        state.settled("https://b", id: b.id, count: 1, now: start + .seconds(2))
        state.settled("https://a", id: a.id, count: 1, now: start + .seconds(3))
        // b was used last at 2 s, a at 3 s: c takes b's place.
        let c = Self.open(&state, "https://c", at: start + .seconds(4))
        #expect(c.closing == ["conn-https://b"])
        #expect(Set(state.origins.keys) == ["https://a", "https://c"])
        // c has a request in flight: d closes a, the only idle one.
        state.settled("https://a", id: a.id, count: 0, now: start + .seconds(5))
        let d = Self.open(&state, "https://d", at: start + .seconds(6))
        #expect(d.closing == ["conn-https://a"])
        // c and d are both busy: e opens beyond the limit rather than cut a request short.
        let e = Self.open(&state, "https://e", at: start + .seconds(7))
        #expect(e.closing.isEmpty)
        #expect(state.origins.count == 3)
        // Once they are answered, the next new origin brings the count back under the limit.
        state.settled("https://c", id: c.id, count: 1, now: start + .seconds(8))
        state.settled("https://d", id: d.id, count: 1, now: start + .seconds(9))
        state.settled("https://e", id: e.id, count: 1, now: start + .seconds(10))
        let f = Self.open(&state, "https://f", at: start + .seconds(11))
        #expect(f.closing == ["conn-https://c", "conn-https://d"])
        #expect(Set(state.origins.keys) == ["https://e", "https://f"])
    }

    @Test func aRetiredConnectionIsNotUsedAgainAndItsLateEventsChangeNothing() {
        var state = Connections(limit: 4, idle: .seconds(30))
        let start = ContinuousClock.now
        let a = Self.open(&state, "https://a", at: start)
        state.retire("https://a", id: a.id)
        guard case .open = state.send("https://a", ["x"], count: 1, now: start) else {
            Issue.record("a retired connection was used")
            return
        }
        guard case .use(let next, _) = state.opened("https://a", "A2", now: start, count: \.count) else {
            Issue.record("not used")
            return
        }
        #expect(next != a.id)
        // The old connection's answers and its end touch the new one in nothing.
        state.settled("https://a", id: a.id, count: 1, now: start)
        state.retire("https://a", id: a.id)
        guard case .open(let open) = state.origins["https://a"] else {
            Issue.record("the new connection was retired")
            return
        }
        #expect(open.inFlight == 1 && open.handle == "A2")
    }

    @Test func aFailedOpeningAnswersWhatWaitedAndTheLinksEndWaitsForEveryPart() {
        var state = Connections(limit: 4, idle: .seconds(30))
        let start = ContinuousClock.now
        _ = Self.open(&state, "https://a", at: start)
        guard case .open = state.send("https://b", ["1"], count: 1, now: start) else {
            Issue.record("not opened")
            return
        }
        _ = state.send("https://b", ["2"], count: 1, now: start)
        let waited = state.failed("https://b")
        #expect(waited == ["1", "2"])
        let lastBeforeClosing = state.partFinished()
        #expect(!lastBeforeClosing, "not closing")
        let (open, done) = state.close()
        #expect(open == ["conn-https://a"] && !done, "a's reader is still running")
        guard case .refused = state.send("https://c", ["3"], count: 1, now: start) else {
            Issue.record("a closing link took a request")
            return
        }
        let last = state.partFinished()
        #expect(last, "a's reader ended: the link's last event")
    }

    @Test func theWindowIsTheLeastAnyOpenConnectionAllows() {
        var state = Connections(limit: 4, idle: .seconds(30))
        let start = ContinuousClock.now
        let a = Self.open(&state, "https://a", at: start)
        let b = Self.open(&state, "https://b", at: start)
        #expect(state.maxStreams("https://a", id: a.id, 1000) == 1000)
        #expect(state.maxStreams("https://b", id: b.id, 100) == 100)
        #expect(state.maxStreams("https://a", id: a.id, 500) == 100)
    }
}
