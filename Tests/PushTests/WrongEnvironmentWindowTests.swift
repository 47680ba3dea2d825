import Testing

@testable import Push

@Suite struct WrongEnvironmentWindowTests {
    @Test func aFewBadTokensAmongManyAnswersRaiseNothing() {
        var window = WrongEnvironmentWindow(size: 100, minimum: 20, threshold: 0.8)
        #expect(window.record(wrong: false, count: 90) == nil)
        #expect(window.record(wrong: true, count: 10) == nil)
        #expect(!window.isRaised)
        #expect(window.share == 0.1)
    }

    @Test func mostAnswersWrongRaisesOnceAndClearsWhenTheyRecover() {
        var window = WrongEnvironmentWindow(size: 100, minimum: 20, threshold: 0.8)
        #expect(window.record(wrong: true, count: 19) == nil, "too few answers to judge")
        #expect(window.record(wrong: true) == .raised)
        #expect(window.record(wrong: true, count: 50) == nil, "raised once")
        // The window keeps the last 100: 70 accepted answers push the share to 30% (below half the threshold).
        #expect(window.record(wrong: false, count: 60) == nil)
        #expect(window.record(wrong: false, count: 10) == .cleared)
        #expect(abs(window.share - 0.3) < 1e-9)
    }

    @Test func theWindowForgetsOldAnswers() {
        var window = WrongEnvironmentWindow(size: 10, minimum: 5, threshold: 0.8)
        _ = window.record(wrong: false, count: 1000)
        #expect(window.record(wrong: true, count: 8) == .raised, "a thousand old answers do not dilute the last ten")
    }
}
