import Testing

@testable import API

/// Refusals are logged a line a second per status, and the next line counts those left out.
@Suite struct RefusalSamplerTests {
    @Test func oneLineAWindowPerStatusWithTheCountLeftOut() {
        let sampler = RefusalSampler(window: .seconds(1))
        let start = ContinuousClock.now
        #expect(sampler.admit(status: 401, now: start) == (true, 0))
        for n in 1...999 {
            #expect(sampler.admit(status: 401, now: start + .milliseconds(n)).log == false)
        }
        #expect(sampler.admit(status: 404, now: start + .milliseconds(10)) == (true, 0), "each status has its own window")
        let next = sampler.admit(status: 401, now: start + .seconds(1))
        #expect(next == (true, 999), "the next line says how many were not logged")
        #expect(sampler.admit(status: 401, now: start + .seconds(3)) == (true, 0))
    }
}
