import Testing

@testable import Settings
@testable import Storage

/// The probe's state machine, without a database: an outage is announced once when it starts, reminded at most once
/// per interval, and its end announced with its length.
@Suite struct DatabaseHealthStateTests {
    let start = ContinuousClock.now

    @Test func startingIsNotUpUntilAProbeAnswers() {
        var state = DatabaseHealthState()
        #expect(!state.isUp)
        #expect(state.probeSucceeded(at: start) == .none, "the first answer is not a return")
        #expect(state.isUp)
    }

    @Test func anOutageIsAnnouncedOnceThenRemindedPerIntervalThenItsEndWithItsLength() {
        var state = DatabaseHealthState(reminder: .seconds(60))
        _ = state.probeSucceeded(at: start)
        #expect(state.probeFailed(reason: "refused", at: start + .seconds(1)) == .wentDown(reason: "refused"))
        #expect(!state.isUp)
        for second in 2...60 {
            #expect(state.probeFailed(reason: "refused", at: start + .seconds(second)) == .none, "second \(second)")
        }
        #expect(state.probeFailed(reason: "timeout", at: start + .seconds(61)) == .stillDown(reason: "timeout", for: .seconds(60)))
        #expect(state.probeFailed(reason: "timeout", at: start + .seconds(62)) == .none)
        #expect(state.probeSucceeded(at: start + .seconds(91)) == .cameBack(downFor: .seconds(90)))
        #expect(state.isUp)
        #expect(state.probeSucceeded(at: start + .seconds(92)) == .none)
        // A second outage is announced again at once.
        #expect(state.probeFailed(reason: "refused", at: start + .seconds(93)) == .wentDown(reason: "refused"))
    }

    @Test func aDatabaseDownAtStartIsAnnounced() {
        var state = DatabaseHealthState()
        #expect(state.probeFailed(reason: "refused", at: start) == .wentDown(reason: "refused"))
        #expect(state.probeSucceeded(at: start + .seconds(5)) == .cameBack(downFor: .seconds(5)))
    }

    @Test func postgresDurationSettingsAreRead() {
        #expect(DatabaseSession.parse("0") == .zero)
        #expect(DatabaseSession.parse("250ms") == .milliseconds(250))
        #expect(DatabaseSession.parse("30s") == .seconds(30))
        #expect(DatabaseSession.parse("5min") == .seconds(300))
        #expect(DatabaseSession.parse("2h") == .seconds(7200))
        #expect(DatabaseSession.parse("1d") == .seconds(86400))
    }

    @Test func onlyADirectSessionSendsItsTimeoutsAndTheMarker() throws {
        var url = try DatabaseURL(parsing: "postgres://u@127.0.0.1/db")
        url.statementTimeout = .seconds(20)
        let direct = Dictionary(uniqueKeysWithValues: DatabaseSession.parameters(url, route: .direct, applicationName: "a"))
        #expect(direct == ["application_name": "a", "statement_timeout": "20000", "lock_timeout": "10000", "pushchat.direct": "on"])
        let pooled = DatabaseSession.parameters(url, route: .pooled, applicationName: "a")
        #expect(pooled.map(\.0) == ["application_name"], "PgBouncer refuses any other start-up parameter")
    }
}
