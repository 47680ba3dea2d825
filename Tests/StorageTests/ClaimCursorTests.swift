import Testing

@testable import Storage

/// Where claims start: past the newest claimed row while claims come back full or NOTIFYs say where rows appear behind
/// it, from the start otherwise; never past a row a rewind announced while a claim was under way.
@Suite struct ClaimCursorTests {
    let t0 = ContinuousClock.now

    /// One claim begun at `t0 + ms` and ended at once; returns where it started.
    static func claim(
        _ cursor: inout ClaimCursor,
        at instant: ContinuousClock.Instant,
        listening: Bool = false,
        count: Int,
        limit: Int,
        newest: Int64?
    ) -> Int64 {
        let claim = cursor.begin(now: instant, listening: listening)
        cursor.claimed(claim, count: count, limit: limit, newest: newest)
        return claim.after
    }

    @Test func aBacklogIsClaimedFromWhereTheLastFullClaimEnded() {
        var cursor = ClaimCursor(rescan: .seconds(1))
        #expect(Self.claim(&cursor, at: t0, count: 100, limit: 100, newest: 100) == 0)
        #expect(Self.claim(&cursor, at: t0 + .milliseconds(10), count: 100, limit: 100, newest: 250) == 100)
        #expect(cursor.begin(now: t0 + .milliseconds(20)).after == 250)
    }

    @Test func aShortClaimSendsTheNextOneToTheStart() {
        var cursor = ClaimCursor(rescan: .seconds(1))
        _ = Self.claim(&cursor, at: t0, count: 100, limit: 100, newest: 100)
        #expect(Self.claim(&cursor, at: t0 + .milliseconds(10), count: 40, limit: 100, newest: 140) == 100)
        #expect(
            Self.claim(&cursor, at: t0 + .milliseconds(20), count: 0, limit: 100, newest: nil) == 0,
            "the end of the queue: what was given back behind is found"
        )
        #expect(cursor.begin(now: t0 + .milliseconds(30)).after == 0)
    }

    @Test func whileListeningAShortClaimMovesTheCursorPastWhatItClaimed() {
        var cursor = ClaimCursor(rescan: .seconds(1))
        #expect(Self.claim(&cursor, at: t0, listening: true, count: 3, limit: 100, newest: 140) == 0)
        #expect(
            Self.claim(&cursor, at: t0 + .milliseconds(10), listening: true, count: 0, limit: 100, newest: nil) == 140,
            "chat in flight behind it is not walked again"
        )
        #expect(
            Self.claim(&cursor, at: t0 + .milliseconds(20), listening: true, count: 2, limit: 100, newest: 120) == 140,
            "an empty claim leaves it where it was"
        )
        #expect(cursor.after == 140, "never back: claims may overlap")
        cursor.rewind(below: 100)
        #expect(
            Self.claim(&cursor, at: t0 + .milliseconds(40), listening: true, count: 1, limit: 100, newest: 100) == 99,
            "a NOTIFY behind it (rows given back, a late commit) rewinds it"
        )
        #expect(Self.claim(&cursor, at: t0 + .milliseconds(50), count: 1, limit: 100, newest: 150) == 100)
        #expect(cursor.begin(now: t0 + .milliseconds(60)).after == 0, "without a listener, a short claim sends the next to the start")
    }

    @Test func everyRescanIntervalAClaimStartsFromTheStartEvenInABacklog() {
        var cursor = ClaimCursor(rescan: .seconds(1))
        _ = Self.claim(&cursor, at: t0, count: 100, limit: 100, newest: 100)
        #expect(Self.claim(&cursor, at: t0 + .milliseconds(999), count: 100, limit: 100, newest: 200) == 100)
        #expect(
            Self.claim(&cursor, at: t0 + .seconds(1), count: 100, limit: 100, newest: 300) == 0,
            "rows behind the cursor (a late commit) wait at most the interval"
        )
        #expect(cursor.begin(now: t0 + .milliseconds(1500)).after == 300, "and the interval starts again")
    }

    @Test func overlappingClaimsNeverMoveTheCursorBack() {
        var cursor = ClaimCursor()
        let first = cursor.begin(now: t0)
        let second = cursor.begin(now: t0)
        cursor.claimed(first, count: 10, limit: 10, newest: 500)
        cursor.claimed(second, count: 10, limit: 10, newest: 300)
        #expect(cursor.after == 500)
    }

    @Test func rowsGivenBackRewindIt() {
        var cursor = ClaimCursor()
        _ = Self.claim(&cursor, at: t0, count: 10, limit: 10, newest: 500)
        cursor.rewind()
        #expect(cursor.begin(now: t0 + .milliseconds(1)).after == 0)
    }

    @Test func whileListeningClaimsNeverGoBackToTheStartOnTheirOwn() {
        var cursor = ClaimCursor(rescan: .seconds(1))
        _ = Self.claim(&cursor, at: t0, listening: true, count: 100, limit: 100, newest: 100)
        #expect(
            Self.claim(&cursor, at: t0 + .seconds(30), listening: true, count: 100, limit: 100, newest: 200) == 100,
            "the NOTIFYs say where rows appear behind it"
        )
        #expect(
            Self.claim(&cursor, at: t0 + .seconds(600), listening: true, count: 100, limit: 100, newest: 300) == 200,
            "ten minutes on, still past what it claimed: the probe behind the cursors is the safety net"
        )
        #expect(cursor.begin(now: t0 + .seconds(602)).after == 0, "without a listener, every rescan interval")
        #expect(Self.claim(&cursor, at: t0 + .milliseconds(602_500), count: 100, limit: 100, newest: 400) == 300)
    }

    @Test func aNotifyBehindTheCursorRewindsItToTheRows() {
        var cursor = ClaimCursor()
        _ = Self.claim(&cursor, at: t0, listening: true, count: 100, limit: 100, newest: 500)
        cursor.rewind(below: 900)
        #expect(
            Self.claim(&cursor, at: t0 + .milliseconds(1), listening: true, count: 100, limit: 100, newest: 600) == 500,
            "rows ahead of the cursor change nothing"
        )
        cursor.rewind(below: 250)
        #expect(cursor.begin(now: t0 + .milliseconds(2), listening: true).after == 249, "the next claim takes message 250")
    }

    /// A claim under way when the NOTIFY came read the queue before the late row was there: when it ends, the cursor
    /// stays before the row until a claim has started from there.
    @Test func aClaimUnderWayWhenTheNotifyCameDoesNotMovePastIt() {
        var cursor = ClaimCursor()
        _ = Self.claim(&cursor, at: t0, listening: true, count: 100, limit: 100, newest: 500)
        let claim = cursor.begin(now: t0 + .milliseconds(1), listening: true)
        #expect(claim.after == 500)
        cursor.rewind(below: 300)
        cursor.claimed(claim, count: 100, limit: 100, newest: 700)
        #expect(
            Self.claim(&cursor, at: t0 + .milliseconds(2), listening: true, count: 100, limit: 100, newest: 800) == 299
        )
        #expect(cursor.after == 800, "once claimed from there, on it goes")
    }

    /// Several connections share a cursor: a claim that began before a NOTIFY must not move the cursor past its rows
    /// even when a later claim began (and ended) meanwhile.
    @Test func overlappingClaimsKeepEachTheirOwnRewinds() {
        var cursor = ClaimCursor()
        _ = Self.claim(&cursor, at: t0, listening: true, count: 100, limit: 100, newest: 500)
        let first = cursor.begin(now: t0 + .milliseconds(1), listening: true)
        let second = cursor.begin(now: t0 + .milliseconds(1), listening: true)
        cursor.rewind(below: 300)
        cursor.claimed(first, count: 100, limit: 100, newest: 700)
        #expect(cursor.after == 299)
        let third = cursor.begin(now: t0 + .milliseconds(2), listening: true)
        #expect(third.after == 299)
        cursor.claimed(second, count: 100, limit: 100, newest: 900)
        #expect(cursor.after == 299, "the second claim began before the rewind: it read the queue before message 300")
        cursor.claimed(third, count: 100, limit: 100, newest: 800)
        #expect(cursor.after == 800, "the third began after it")
    }

    /// A claim that failed moves nothing and keeps nothing.
    @Test func anAbandonedClaimLeavesNothingBehind() {
        var cursor = ClaimCursor()
        _ = Self.claim(&cursor, at: t0, count: 10, limit: 10, newest: 500)
        let failed = cursor.begin(now: t0 + .milliseconds(1))
        #expect(cursor.claimsUnderWay == 1)
        cursor.rewind(below: 200)
        cursor.abandoned(failed)
        #expect(cursor.claimsUnderWay == 0)
        #expect(cursor.after == 199)
    }
}
