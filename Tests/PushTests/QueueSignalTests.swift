import Testing

@testable import Push

@Suite struct QueueSignalTests {
    /// A signal that comes before the spacing has passed is kept, and the wait ends once the spacing has passed: a
    /// loop that looks on every NOTIFY looks at most once per spacing, and misses none.
    @Test func aSpacedWaitEndsOnASignalButNotBeforeTheSpacing() async {
        let signal = QueueSignal()
        let looked = ContinuousClock.now
        let generation = signal.generation
        signal.signal()
        await signal.wait(after: generation, timeout: .seconds(30), spacedFrom: looked, by: .milliseconds(150))
        let waited = ContinuousClock.now - looked
        #expect(waited >= .milliseconds(150), "it looked again \(waited) after the last look")
        #expect(waited < .seconds(10), "the signal ended the wait, not the timeout")
    }

    /// Once the spacing has passed, a signal ends the wait at once.
    @Test func aSignalAfterTheSpacingEndsTheWaitAtOnce() async {
        let signal = QueueSignal()
        let looked = ContinuousClock.now - .seconds(1)
        let generation = signal.generation
        let start = ContinuousClock.now
        let waiter = Task { await signal.wait(after: generation, timeout: .seconds(30), spacedFrom: looked, by: .milliseconds(150)) }
        try? await Task.sleep(for: .milliseconds(20))
        signal.signal()
        await waiter.value
        #expect(ContinuousClock.now - start < .seconds(10))
    }

    /// Without a signal, the timeout ends the wait.
    @Test func withoutASignalTheTimeoutEndsTheWait() async {
        let signal = QueueSignal()
        let start = ContinuousClock.now
        await signal.wait(after: signal.generation, timeout: .milliseconds(100), spacedFrom: start, by: .milliseconds(10))
        #expect(ContinuousClock.now - start >= .milliseconds(100))
    }
}
