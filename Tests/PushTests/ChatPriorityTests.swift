import Testing

@testable import Push

/// Chat first (`push_chat_target`), on a clock of its own: a step whose median chat claim is slower than the target cuts
/// the broadcast's pace by a quarter, down to the floor; one within it lets the pace grow back; a quiet second lifts it.
@Suite struct ChatPriorityTests {
    let start = ContinuousClock.now

    /// A broadcast granted `perSecond` rows/s for `span` in claims every 10 ms, from `from`; the instant after.
    func drain(_ priority: inout ChatPriority, perSecond: Int, for span: Duration, from: ContinuousClock.Instant) -> ContinuousClock.Instant
    {
        var now = from
        while now < from + span {
            priority.granted(perSecond / 100, now: now)
            now += .milliseconds(10)
        }
        return now
    }

    @Test func slowChatClaimsCutTheBroadcastByAQuarterPerStepDownToTheFloor() {
        var priority = ChatPriority(target: .milliseconds(8), floor: 1_000, now: start)
        var now = drain(&priority, perSecond: 20_000, for: .seconds(1), from: start)
        #expect(priority.pace(now: now) == nil, "no chat yet: no pace")
        #expect(abs(priority.observed - 20_000) < 1_000, "\(priority.observed)")
        priority.chatClaimed(taking: .milliseconds(30), now: now)
        let first = priority.pace(now: now) ?? -1
        #expect(abs(first - 15_000) < 750, "a quarter off what the broadcast took: \(first)")
        priority.chatClaimed(taking: .milliseconds(30), now: now + .milliseconds(50))
        #expect(priority.pace(now: now + .milliseconds(50)) == first, "one cut per step")
        for _ in 0..<40 {
            now += ChatPriority.step
            priority.chatClaimed(taking: .milliseconds(30), now: now)
        }
        #expect(priority.pace(now: now) == 1_000, "never below the floor")
    }

    @Test func aStepWhoseMedianClaimIsWithinTheTargetLetsItGrowBackAndAQuietSecondLiftsIt() {
        var priority = ChatPriority(target: .milliseconds(8), floor: 1_000, now: start)
        var now = drain(&priority, perSecond: 10_000, for: .seconds(1), from: start)
        priority.chatClaimed(taking: .milliseconds(20), now: now)
        let cut = priority.pace(now: now) ?? -1
        #expect(abs(cut - 7_500) < 500, "\(cut)")
        // One slow claim among fast ones: the median is within the target, the pace grows by a tenth.
        for (offset, milliseconds) in [(50, 2), (100, 30), (150, 3), (200, 2)] {
            priority.chatClaimed(taking: .milliseconds(milliseconds), now: now + .milliseconds(offset))
        }
        now += .milliseconds(200)
        let grown = priority.pace(now: now) ?? -1
        #expect(abs(grown - cut * 1.1) < 1, "\(grown)")
        // Most of a step's claims slow: cut again.
        for (offset, milliseconds) in [(50, 2), (100, 30), (150, 30), (200, 12)] {
            priority.chatClaimed(taking: .milliseconds(milliseconds), now: now + .milliseconds(offset))
        }
        now += .milliseconds(200)
        #expect(abs((priority.pace(now: now) ?? -1) - grown * 0.75) < 1)
        // Quiet for a second: full pace.
        #expect(priority.pace(now: now + .milliseconds(999)) != nil)
        #expect(priority.pace(now: now + ChatPriority.idle) == nil)
    }

    @Test func aPaceTheBroadcastDoesNotUseIsLifted() {
        var priority = ChatPriority(target: .milliseconds(8), floor: 1_000, now: start)
        var now = drain(&priority, perSecond: 8_000, for: .seconds(1), from: start)
        priority.chatClaimed(taking: .milliseconds(20), now: now)
        #expect(priority.pace(now: now) != nil)
        // The broadcast now takes far less than allowed (its gateway, not the machine, holds it back).
        now = drain(&priority, perSecond: 1_000, for: .seconds(1), from: now)
        var steps = 0
        while priority.pace(now: now) != nil, steps < 20 {
            now += ChatPriority.step
            priority.chatClaimed(taking: .milliseconds(1), now: now)
            steps += 1
        }
        #expect(priority.pace(now: now) == nil, "lifted once it grew past twice what the broadcast takes")
        #expect(steps < 20)
    }

    @Test func theDaemonsRateAppliesTheSmallerOfBothPaces() {
        let rate = BroadcastRate(perSecond: nil, chatTarget: .milliseconds(8), now: .now - .seconds(1))
        #expect(rate.pace == nil)
        #expect(rate.take(upTo: 2_000) == 2_000, "no pace: every row")
        rate.chatClaimed(taking: .milliseconds(50))
        #expect(rate.pace == 1_000, "cut from next to nothing observed: the floor")
        #expect(rate.take(upTo: 2_000) == 100, "a tenth of a second's worth")
        let configured = BroadcastRate(perSecond: 500, chatTarget: .milliseconds(8), now: .now - .seconds(1))
        configured.chatClaimed(taking: .milliseconds(50))
        #expect(configured.pace == 500, "push_broadcast_rate when it is the smaller")
    }
}
