import Testing

@testable import API
@testable import Support

@Suite struct RateLimiterTests {
    let start = ContinuousClock.now

    @Test func allowsTheBurstThenAsksToWait() {
        let limiter = RateLimiter(rate: 2, burst: 3)
        for _ in 0..<3 { #expect(limiter.take("a", now: start) == nil) }
        let wait = limiter.take("a", now: start)
        #expect(wait == .milliseconds(500), "one token comes back every 1/rate seconds")
        #expect(limiter.take("b", now: start) == nil, "keys are independent")
    }

    @Test func refillsOverTimeUpToTheBurst() {
        let limiter = RateLimiter(rate: 10, burst: 2)
        #expect(limiter.take("a", now: start) == nil)
        #expect(limiter.take("a", now: start) == nil)
        #expect(limiter.take("a", now: start) != nil)
        #expect(limiter.take("a", now: start + .milliseconds(100)) == nil)
        #expect(limiter.take("a", now: start + .milliseconds(100)) != nil)
        // A long pause refills to the burst, not beyond.
        let later = start + .seconds(60)
        #expect(limiter.take("a", now: later) == nil)
        #expect(limiter.take("a", now: later) == nil)
        #expect(limiter.take("a", now: later) != nil)
    }

    @Test func zeroRateMeansNoLimitAndMemoryStaysBounded() {
        #expect((0..<1000).allSatisfy { _ in RateLimiter(rate: 0, burst: 1).take("a", now: start) == nil })
        let limiter = RateLimiter(rate: 1000, burst: 1, maximumKeys: 10)
        for key in 0..<100 { #expect(limiter.take("k\(key)", now: start + .seconds(key)) == nil) }
        #expect(limiter.keyCount <= 2, "refilled keys are forgotten as new ones pass")
    }

    /// A flood of new addresses, all still limited (none refilled): the limiter keeps at most `maximumKeys` (plus the
    /// one being used) and never scans them all; the least recently used go first.
    @Test func aFloodOfNewKeysStaysBoundedAtConstantCost() {
        let limiter = RateLimiter(rate: 1, burst: 5, maximumKeys: 1000)
        for key in 0..<50_000 { _ = limiter.take("flood\(key)", cost: 5, now: start) }
        #expect(limiter.keyCount <= 1001)
        #expect(limiter.take("flood49999", now: start) != nil, "the newest keys are still limited")
    }

    @Test func costsAndRefunds() {
        let limiter = RateLimiter(rate: 100, burst: 1000)
        #expect(limiter.take("ip", cost: 600, now: start) == nil)
        #expect(limiter.take("ip", cost: 600, now: start) == .milliseconds(2000), "200 missing at 100/s")
        limiter.refund("ip", 250, now: start)
        #expect(limiter.take("ip", cost: 600, now: start) == nil)
        #expect(limiter.take("ip", cost: 5000, now: start) != nil, "more than the bucket holds is refused")
    }
}
