import Foundation
import NIOCore
import Testing

@testable import APNs

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
