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

    /// The inline token the encoder writes: every digit's value read branch-free, and any byte that is not a hex digit
    /// (each neighbour of the digit ranges, in each position) refused.
    @Test func theInlineTokenReadsEveryDigitAndRefusesEverythingElse() throws {
        let bytes = (0..<32).map { UInt8($0 * 8 + 3) }
        let hex = DeviceToken.hex(bytes)
        for text in [hex, hex.uppercased()] {
            let token = try #require(DeviceToken.Binary(hex: text))
            #expect(token.withUnsafeBytes { Array($0) } == bytes)
            #expect(token == DeviceToken.Binary(hex: hex.lowercased()))
        }
        #expect(DeviceToken.Binary(hex: hex) != DeviceToken.Binary(hex: String(hex.dropLast()) + "0"))
        for bad in ["/", ":", "@", "G", "`", "g", " ", "é"] {
            for position in [0, 1, 31, 62, 63] {
                var digits = Array(hex)
                digits[position] = Character(bad)
                #expect(DeviceToken.Binary(hex: String(digits)) == nil, "\(bad) at \(position)")
            }
        }
        #expect(DeviceToken.Binary(hex: String(hex.dropLast(2))) == nil)
        #expect(DeviceToken.Binary(hex: hex + "00") == nil)
        #expect(DeviceToken.Binary(hex: "") == nil)
    }

    /// A copy of a row is the same row; rows that differ in any field are not equal (the fields sit behind one reference).
    @Test func rowsCompareByEveryField() {
        let base = QueuedNotification(messageID: 1, deviceToken: "aa", payload: "{}", priority: 5, topic: "t", app: "a")
        var copy = base
        #expect(copy == base)
        copy.retries += 1
        #expect(copy != base)
        #expect(base == QueuedNotification(messageID: 1, deviceToken: "aa", payload: "{}", priority: 5, topic: "t", app: "a"))
        for other in [
            QueuedNotification(messageID: 2, deviceToken: "aa", payload: "{}", priority: 5, topic: "t", app: "a"),
            QueuedNotification(messageID: 1, deviceToken: "ab", payload: "{}", priority: 5, topic: "t", app: "a"),
            QueuedNotification(messageID: 1, deviceToken: "aa", payload: "{ }", priority: 5, topic: "t", app: "a"),
            QueuedNotification(messageID: 1, deviceToken: "aa", payload: "{}", priority: 10, topic: "t", app: "a"),
            QueuedNotification(messageID: 1, deviceToken: "aa", payload: "{}", priority: 5, topic: "u", app: "a"),
            QueuedNotification(messageID: 1, deviceToken: "aa", payload: "{}", priority: 5, topic: "t", app: nil),
        ] {
            #expect(other != base)
        }
    }
}
