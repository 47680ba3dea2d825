import Testing

@testable import Storage

/// Where claims start: past the newest claimed row while claims come back full, from the start otherwise.
@Suite struct ClaimCursorTests {
    let t0 = ContinuousClock.now

    @Test func aBacklogIsClaimedFromWhereTheLastFullClaimEnded() {
        var cursor = ClaimCursor(rescan: .seconds(1))
        #expect(cursor.start(now: t0) == 0)
        cursor.claimed(count: 100, limit: 100, newest: 100)
        #expect(cursor.start(now: t0 + .milliseconds(10)) == 100)
        cursor.claimed(count: 100, limit: 100, newest: 250)
        #expect(cursor.start(now: t0 + .milliseconds(20)) == 250)
    }

    @Test func aShortClaimSendsTheNextOneToTheStart() {
        var cursor = ClaimCursor(rescan: .seconds(1))
        _ = cursor.start(now: t0)
        cursor.claimed(count: 100, limit: 100, newest: 100)
        #expect(cursor.start(now: t0 + .milliseconds(10)) == 100)
        cursor.claimed(count: 40, limit: 100, newest: 140)
        #expect(cursor.start(now: t0 + .milliseconds(20)) == 0, "the end of the queue: what was given back behind is found")
        cursor.claimed(count: 0, limit: 100, newest: nil)
        #expect(cursor.start(now: t0 + .milliseconds(30)) == 0)
    }

    @Test func everyRescanIntervalAClaimStartsFromTheStartEvenInABacklog() {
        var cursor = ClaimCursor(rescan: .seconds(1))
        _ = cursor.start(now: t0)
        cursor.claimed(count: 100, limit: 100, newest: 100)
        #expect(cursor.start(now: t0 + .milliseconds(999)) == 100)
        cursor.claimed(count: 100, limit: 100, newest: 200)
        #expect(cursor.start(now: t0 + .seconds(1)) == 0, "rows behind the cursor (a late commit) wait at most the interval")
        cursor.claimed(count: 100, limit: 100, newest: 300)
        #expect(cursor.start(now: t0 + .milliseconds(1500)) == 300, "and the interval starts again")
    }

    @Test func overlappingClaimsNeverMoveTheCursorBack() {
        var cursor = ClaimCursor()
        _ = cursor.start(now: t0)
        cursor.claimed(count: 10, limit: 10, newest: 500)
        cursor.claimed(count: 10, limit: 10, newest: 300)
        #expect(cursor.after == 500)
    }

    @Test func rowsGivenBackRewindIt() {
        var cursor = ClaimCursor()
        _ = cursor.start(now: t0)
        cursor.claimed(count: 10, limit: 10, newest: 500)
        cursor.rewind()
        #expect(cursor.start(now: t0 + .milliseconds(1)) == 0)
    }

    @Test func whileListeningTheClaimFromTheStartIsOnlyASafetyNet() {
        var cursor = ClaimCursor(rescan: .seconds(1))
        _ = cursor.start(now: t0, listening: true)
        cursor.claimed(count: 100, limit: 100, newest: 100)
        #expect(cursor.start(now: t0 + .seconds(30), listening: true) == 100, "the NOTIFYs say where rows appear behind it")
        cursor.claimed(count: 100, limit: 100, newest: 200)
        #expect(cursor.start(now: t0 + .seconds(60), listening: true) == 0, "once a minute from the start all the same")
        cursor.claimed(count: 100, limit: 100, newest: 300)
        #expect(cursor.start(now: t0 + .milliseconds(60_500), listening: false) == 300)
        cursor.claimed(count: 100, limit: 100, newest: 400)
        #expect(cursor.start(now: t0 + .seconds(62), listening: false) == 0, "without a listener, every rescan interval")
    }

    @Test func aNotifyBehindTheCursorRewindsItToTheRows() {
        var cursor = ClaimCursor()
        _ = cursor.start(now: t0, listening: true)
        cursor.claimed(count: 100, limit: 100, newest: 500)
        cursor.rewind(below: 900)
        #expect(cursor.start(now: t0 + .milliseconds(1), listening: true) == 500, "rows ahead of the cursor change nothing")
        cursor.claimed(count: 100, limit: 100, newest: 600)
        cursor.rewind(below: 250)
        #expect(cursor.start(now: t0 + .milliseconds(2), listening: true) == 249, "the next claim takes message 250")
    }

    /// A claim under way when the NOTIFY came read the queue before the late row was there: when it ends, the cursor
    /// stays before the row until a claim has started from there.
    @Test func aClaimUnderWayWhenTheNotifyCameDoesNotMovePastIt() {
        var cursor = ClaimCursor()
        _ = cursor.start(now: t0, listening: true)
        cursor.claimed(count: 100, limit: 100, newest: 500)
        #expect(cursor.start(now: t0 + .milliseconds(1), listening: true) == 500)
        cursor.rewind(below: 300)
        cursor.claimed(count: 100, limit: 100, newest: 700)
        #expect(cursor.start(now: t0 + .milliseconds(2), listening: true) == 299)
        cursor.claimed(count: 100, limit: 100, newest: 800)
        #expect(cursor.start(now: t0 + .milliseconds(3), listening: true) == 800, "once claimed from there, on it goes")
    }
}
