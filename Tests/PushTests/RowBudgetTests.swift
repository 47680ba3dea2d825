import Testing

@testable import Push

/// `push_broadcast_rate`'s budget, on a clock of its own: shares of a tenth of a second, refilled at the rate.
@Suite struct RowBudgetTests {
    let start = ContinuousClock.now

    @Test func grantsATenthOfASecondAtOnceThenRefillsAtTheRate() {
        var budget = RowBudget(perSecond: 1000, now: start)
        #expect(budget.take(upTo: 2000, now: start) == 100, "a tenth of a second's worth at once")
        #expect(budget.take(upTo: 2000, now: start) == 0, "spent")
        #expect(budget.wait(now: start) == .milliseconds(1), "one row per millisecond")
        #expect(budget.take(upTo: 2000, now: start + .milliseconds(50)) == 50)
        #expect(budget.take(upTo: 10, now: start + .milliseconds(100)) == 10, "never more than asked")
        #expect(budget.take(upTo: 2000, now: start + .milliseconds(100)) == 40)
        // Idle for a minute: still only a tenth of a second's worth, not a minute's.
        #expect(budget.take(upTo: 100_000, now: start + .seconds(60)) == 100)
    }

    @Test func whatAClaimDidNotUseComesBackUpToTheBurst() {
        var budget = RowBudget(perSecond: 1000, now: start)
        #expect(budget.take(upTo: 100, now: start) == 100)
        budget.giveBack(30)
        #expect(budget.take(upTo: 100, now: start) == 30)
        budget.giveBack(500)
        #expect(budget.available == 100, "never above the burst")
        budget.giveBack(-5)
        #expect(budget.available == 100)
    }

    @Test func overASecondItGrantsTheRateAndNoMore() {
        var budget = RowBudget(perSecond: 250, now: start)
        var granted = 0
        var now = start
        while now < start + .seconds(1) {
            granted += budget.take(upTo: 7, now: now)
            now += .milliseconds(3)
        }
        // 25 at once, then 250 per second.
        #expect(granted <= 25 + 250 && granted >= 250, "granted \(granted)")
    }

    @Test func aSlowRateStillGrantsOneRowAtATime() {
        var budget = RowBudget(perSecond: 2, now: start)
        #expect(budget.burst == 1)
        #expect(budget.take(upTo: 10, now: start) == 1)
        #expect(budget.wait(now: start) == .milliseconds(500))
        #expect(budget.take(upTo: 10, now: start + .milliseconds(499)) == 0)
        #expect(budget.take(upTo: 10, now: start + .milliseconds(500)) == 1)
    }
}

extension RowBudgetTests {
    @Test func aClaimForBroadcastRowsOnlyWaitsForAWholeShare() {
        var budget = RowBudget(perSecond: 5000, now: start)
        #expect(budget.share(of: 2000) == 500, "a tenth of a second's worth")
        #expect(budget.share(of: 200) == 200, "or the claim, when smaller")
        #expect(budget.take(upTo: 2000, atLeast: 500, now: start) == 500)
        // 1 ms later one row's worth is back: not a share yet.
        #expect(budget.take(upTo: 2000, atLeast: 500, now: start + .milliseconds(1)) == 0)
        #expect(budget.wait(for: 500, now: start + .milliseconds(1)) == .milliseconds(99))
        #expect(budget.take(upTo: 2000, atLeast: 500, now: start + .milliseconds(100)) == 500)
        // A claim that takes other rows too takes what there is.
        #expect(budget.take(upTo: 2000, now: start + .milliseconds(110)) == 50)
    }
}
