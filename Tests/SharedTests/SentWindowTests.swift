import Foundation
import NIOCore
import Testing

@testable import Shared

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

@Suite struct BackoffTests {
    @Test func doublesUpToTheCapWithJitter() {
        var backoff = Backoff(initial: .seconds(1), maximum: .seconds(60))
        var generator = SeededGenerator(seed: 7)
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

@Suite struct BinaryEncoderTests {
    let encoder = BinaryEncoder(expiry: 3600, priority: 10)
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func encode(_ notification: QueuedNotification) -> (BinaryNotification?, UnsendableReason?) {
        var buffer = ByteBuffer()
        if let reason = encoder.write(notification, into: &buffer, now: now) { return (nil, reason) }
        return (try? BinaryFrameDecoder.decode(&buffer), nil)
    }

    @Test func encodesTheRowAsACommandTwoFrame() throws {
        let token = String(repeating: "aB", count: 32)
        let (frame, reason) = encode(QueuedNotification(messageID: 0x1_0000_0005, deviceToken: token, payload: #"{"aps":{}}"#))
        #expect(reason == nil)
        let decoded = try #require(frame)
        #expect(decoded.identifier == 5, "the low 32 bits of the message id")
        #expect(decoded.expiry == 1_800_003_600)
        #expect(decoded.priority == 10)
        #expect(DeviceToken.hex(decoded.token.readableBytesView) == token.lowercased())
    }

    @Test func theRowsOwnPriorityAndExpirationWin() throws {
        let row = QueuedNotification(
            messageID: 1,
            deviceToken: String(repeating: "0", count: 64),
            payload: "{}",
            priority: 5,
            expiration: Date(timeIntervalSince1970: 1_800_000_100)
        )
        let decoded = try #require(encode(row).0)
        #expect(decoded.priority == 5)
        #expect(decoded.expiry == 1_800_000_100)
    }

    @Test(arguments: [
        (String(repeating: "0", count: 63), "{}"),
        (String(repeating: "z", count: 64), "{}"),
        ("0", "{}"),
        (String(repeating: "0", count: 64), ""),
        (String(repeating: "0", count: 64), String(repeating: "x", count: 2049)),
    ])
    func unsendableRows(token: String, payload: String) {
        let (frame, reason) = encode(QueuedNotification(messageID: 1, deviceToken: token, payload: payload))
        #expect(frame == nil)
        #expect(reason != nil)
    }
}
