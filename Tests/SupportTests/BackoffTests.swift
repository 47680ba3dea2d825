import Testing

@testable import Support

@Suite struct BackoffTests {
    @Test func doublesUpToTheCapWithJitter() {
        var backoff = Backoff(initial: .seconds(1), maximum: .seconds(60))
        var generator = SystemRandomNumberGenerator()  // the bounds hold for any draw
        var delays: [Duration] = []
        for _ in 0..<10 { delays.append(backoff.next(using: &generator)) }
        for (attempt, delay) in delays.enumerated() {
            let ceiling = min(Duration.seconds(60), .seconds(1) * Double(1 << attempt))
            #expect(delay <= ceiling)
            #expect(delay >= ceiling / 2)
        }
        #expect(delays.last! >= .seconds(30))
        backoff.reset()
        #expect(backoff.next(using: &generator) <= .seconds(1))
    }
}
