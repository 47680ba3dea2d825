import Testing

@testable import API

/// Connections per address and in all: refused past either cap, counted again as they close.
@Suite struct ConnectionCounterTests {
    @Test func perAddressAndTotalCaps() {
        let counter = ConnectionCounter(maximum: 2, maximumTotal: 3)
        #expect(counter.open("a") == nil)
        #expect(counter.open("a") == nil)
        #expect(counter.open("a") == .address)
        #expect(counter.open(nil) == nil, "a trusted proxy is not limited per address")
        #expect(counter.open("b") == .total)
        counter.close("a")
        #expect(counter.open("b") == nil)
        #expect(counter.openCount == 3)
    }
}
