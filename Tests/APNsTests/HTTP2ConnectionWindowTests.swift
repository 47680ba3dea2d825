import Testing

@testable import APNs
@testable import HTTP2Client
@testable import Support

@Suite struct HTTP2ConnectionWindowTests {
    @Test func theFirstGrantRaisesTheDefaultWindowToTheTarget() {
        let window = HTTP2ConnectionWindow(target: 1 << 20)
        // After the first DATA frame the peer has a little under 65,535 bytes left: grant up to 1 MiB.
        #expect(window.increment(remaining: 65_535 - 100) == (1 << 20) - 65_435)
    }

    @Test func grantsOnlyOnceHalfTheTargetIsUsed() {
        let window = HTTP2ConnectionWindow(target: 1_000_000)
        #expect(window.increment(remaining: 1_000_000) == nil)
        #expect(window.increment(remaining: 500_001) == nil)
        #expect(window.increment(remaining: 500_000) == 500_000)
        #expect(window.increment(remaining: 0) == 1_000_000)
        #expect(window.increment(remaining: -10) == 1_000_000, "a window driven below zero by a SETTINGS change")
    }

    @Test func theProtocolDefaultAsTargetKeepsTheWindowOpen() {
        let window = HTTP2ConnectionWindow(target: HTTP2ConnectionWindow.initialSize)
        #expect(window.increment(remaining: 40_000) == nil)
        #expect(window.increment(remaining: 30_000) == 35_535)
    }
}
