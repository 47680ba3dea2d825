import Foundation
import NIOCore
import Testing

@testable import APNs
@testable import Support

@Suite struct SentWindowTests {
    let start = ContinuousClock.now

    func window(_ identifiers: [UInt32], spacing: Duration = .milliseconds(10)) -> SentWindow<UInt32> {
        var window = SentWindow<UInt32>(capacity: 100)
        for (index, identifier) in identifiers.enumerated() {
            window.append(identifier, identifier: identifier, writtenAt: start + spacing * index)
        }
        return window
    }

    @Test func settlesByAge() {
        var window = window([1, 2, 3, 4])
        #expect(window.removeSettled(writtenBefore: start + .milliseconds(15)) == [1, 2])
        #expect(window.count == 2)
        #expect(window.oldestWrite == start + .milliseconds(20))
        #expect(window.freeSpace == 98)
        #expect(window.removeSettled(writtenBefore: start - .seconds(1)).isEmpty)
    }

    @Test func anErrorFailsItsNotificationAcceptsEarlierOnesAndResendsLaterOnes() {
        var window = window([1, 2, 3, 4, 5])
        let resolution = window.resolve(BinaryErrorResponse(status: .invalidToken, identifier: 3))
        #expect(resolution.accepted == [1, 2])
        #expect(resolution.failed == 3)
        #expect(resolution.resend == [4, 5])
        #expect(window.isEmpty)
    }

    @Test func shutdownNamesTheLastAccepted() {
        var window = window([1, 2, 3, 4, 5])
        let resolution = window.resolve(BinaryErrorResponse(status: .shutdown, identifier: 3))
        #expect(resolution.accepted == [1, 2, 3])
        #expect(resolution.failed == nil)
        #expect(resolution.resend == [4, 5])
    }

    @Test func anUnknownIdentifierResendsEverything() {
        var window = window([1, 2, 3])
        let resolution = window.resolve(BinaryErrorResponse(status: .processingError, identifier: 99))
        #expect(resolution.accepted.isEmpty)
        #expect(resolution.failed == nil)
        #expect(resolution.resend == [1, 2, 3])
    }

    /// Written, restamped and settled in turns far past the ring's first capacity (it wraps around many times): the
    /// order, the restamp of the newest entries only and an error response in the middle all hold.
    @Test func aWindowThatWrapsAroundKeepsOrderRestampsAndResolves() {
        var window = SentWindow<UInt32>(capacity: 100)
        var next: UInt32 = 1
        var settled: [UInt32] = []
        for turn in 0..<200 {
            let written = start + .milliseconds(turn)
            for _ in 0..<7 {
                window.append(next, identifier: next, writtenAt: written)
                next += 1
            }
            // The last 3 finished writing a moment later: they settle a turn after the first 4.
            window.restampLast(3, at: written + .microseconds(500))
            settled += window.removeSettled(writtenBefore: written)
        }
        #expect(settled == Array(1...(next - 4)), "everything but the last 3, in order")
        #expect(settled.count == 199 * 7 + 4, "each turn settles the previous turn's restamped 3 and its own first 4")
        #expect(window.count == 3)
        #expect(window.items == [next - 3, next - 2, next - 1])
        let resolution = window.resolve(BinaryErrorResponse(status: .invalidToken, identifier: next - 2))
        #expect(resolution.accepted == [next - 3])
        #expect(resolution.failed == next - 2)
        #expect(resolution.resend == [next - 1])
        #expect(window.isEmpty)
    }

    @Test func afterSettlingOnlyTheRestIsResolved() {
        var window = window([1, 2, 3, 4])
        _ = window.removeSettled(writtenBefore: start + .milliseconds(5))
        let resolution = window.resolve(BinaryErrorResponse(status: .invalidToken, identifier: 2))
        #expect(resolution.accepted.isEmpty)
        #expect(resolution.failed == 2)
        #expect(resolution.resend == [3, 4])
    }

    @Test func aDroppedConnectionResendsTheWholeWindow() {
        var window = window([7, 8, 9])
        _ = window.removeSettled(writtenBefore: start)
        #expect(window.removeAllItems() == [8, 9])
        #expect(window.isEmpty)
    }

    @Test func compactionKeepsOrder() {
        var window = SentWindow<Int>(capacity: 20_000)
        for index in 0..<10_000 { window.append(index, identifier: UInt32(index), writtenAt: start + .microseconds(index)) }
        #expect(window.removeSettled(writtenBefore: start + .microseconds(6_000)).count == 6_001)
        #expect(window.items.first == 6_001)
        #expect(window.count == 3_999)
    }
}
