import Crypto
import Foundation
import NIOCore
import NIOHPACK
import Testing

@testable import APNs
@testable import HTTP2Client

/// The bytes and headers the project writes and reads, checked against Apple's documented layouts written out by
/// hand here (`../shared/PROTOCOL.md`), not against the project's own encoder or decoder: a mistake made the same
/// way on both sides (the simulator decodes with the same code) would pass every round trip.
@Suite struct WireKnownAnswerTests {
    /// Hex digits (spaces ignored) as bytes.
    static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.filter { !$0.isWhitespace })
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
    }

    static let tokenHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

    @Test func aCommandTwoFrameIsLaidOutAsAppleDocumentsIt() throws {
        let payload = #"{"aps":{"alert":"hi"}}"#  // 22 bytes
        let notification = QueuedNotification(
            messageID: 0x0102_0304,
            deviceToken: Self.tokenHex,
            payload: payload,
            expiration: Date(timeIntervalSince1970: 1_900_000_000)
        )
        var buffer = ByteBuffer()
        let reason = BinaryEncoder(expiry: 0, priority: 10).write(notification, into: &buffer, now: Date())
        #expect(reason == nil)
        let expected =
            Self.bytes(
                """
                02 0000004e
                01 0020 \(Self.tokenHex)
                02 0016
                """
            ) + Array(payload.utf8)
            + Self.bytes(
                """
                03 0004 01020304
                04 0004 713fb300
                05 0001 0a
                """
            )
        // Frame length: 5 items of 3 header bytes + 32 + 22 + 4 + 4 + 1 = 78 (0x4e).
        #expect(Array(buffer: buffer) == expected)
    }

    @Test func aPowerConsideratePriorityIsFive() {
        let notification = QueuedNotification(messageID: 1, deviceToken: Self.tokenHex, payload: "{}", priority: 5)
        var buffer = ByteBuffer()
        _ = BinaryEncoder(expiry: 0, priority: 10).write(notification, into: &buffer, now: Date())
        #expect(Array(Array(buffer: buffer).suffix(4)) == [0x05, 0x00, 0x01, 0x05], "item 5, length 1, priority 5")
    }

    @Test func anErrorResponseIsCommandEightStatusAndIdentifier() throws {
        var buffer = ByteBuffer(bytes: Self.bytes("08 08 0000002a"))
        let response = try #require(try BinaryErrorResponse.read(from: &buffer))
        #expect(response.status == .invalidToken)
        #expect(response.identifier == 42)
        #expect(buffer.readableBytes == 0)

        var shutdown = ByteBuffer(bytes: Self.bytes("08 0a fffffffe"))
        let last = try #require(try BinaryErrorResponse.read(from: &shutdown))
        #expect(last.status == .shutdown)
        #expect(last.identifier == 0xFFFF_FFFE)

        var written = ByteBuffer()
        BinaryErrorResponse(status: .processingError, identifier: 0x0102_0304).write(into: &written)
        #expect(Array(buffer: written) == Self.bytes("08 01 01020304"), "what the simulator writes")

        var partial = ByteBuffer(bytes: Self.bytes("08 08 0000"))
        #expect(try BinaryErrorResponse.read(from: &partial) == nil, "five of six bytes: wait for the rest")
        var wrong = ByteBuffer(bytes: Self.bytes("02 08 0000002a"))
        #expect(throws: BinaryDecodingError.self) { try BinaryErrorResponse.read(from: &wrong) }
    }

    @Test func aFeedbackTupleIsTimestampLengthToken() throws {
        // 1,600,000,000 s = 0x5f5e1000; then a second tuple, cut short.
        var buffer = ByteBuffer(bytes: Self.bytes("5f5e1000 0020 \(Self.tokenHex) 5f5e1001 0020 0001"))
        let tuple = try #require(try FeedbackTuple.read(from: &buffer))
        #expect(tuple.timestamp == 1_600_000_000)
        #expect(tuple.tokenHex == Self.tokenHex)
        #expect(try FeedbackTuple.read(from: &buffer) == nil, "the second is incomplete")
        #expect(buffer.readableBytes == 8, "its 4 + 2 + 2 bytes wait for the rest")

        var written = ByteBuffer()
        FeedbackTuple(timestamp: 1_600_000_000, token: Self.bytes(Self.tokenHex)).write(into: &written)
        #expect(Array(buffer: written) == Self.bytes("5f5e1000 0020 \(Self.tokenHex)"), "what the simulator writes")
    }

    @Test func anHTTP2RequestCarriesApplesHeaders() throws {
        let notification = QueuedNotification(
            messageID: 42,
            deviceToken: Self.tokenHex.uppercased(),
            payload: #"{"aps":{"content-available":1}}"#,
            priority: 5,
            expiration: Date(timeIntervalSince1970: 1_900_000_000),
            collapseID: "room-7",
            pushType: "background"
        )
        let request = try HTTP2Notification(notification, topic: "com.example.PushChat", defaultPriority: 10, defaultExpiry: 0, now: Date())
        let block = HTTP2Request.headerBlock(request, authority: "api.push.apple.com", authorization: "bearer eyJ.a.b")
        let pairs = block.map { "\($0.name): \($0.value)" }
        #expect(
            pairs == [
                ":method: POST",
                ":scheme: https",
                ":path: /3/device/\(Self.tokenHex)",
                ":authority: api.push.apple.com",
                "apns-topic: com.example.PushChat",
                "apns-push-type: background",
                "apns-priority: 5",
                "apns-expiration: 1900000000",
                "apns-id: 50757368-4368-8000-8000-00000000002a",
                "apns-collapse-id: room-7",
                "authorization: bearer eyJ.a.b",
            ]
        )
        let voip = try HTTP2Notification(
            QueuedNotification(messageID: 1, deviceToken: Self.tokenHex, payload: "{}", pushType: "voip"),
            topic: "com.example.PushChat",
            defaultPriority: 10,
            defaultExpiry: 0,
            now: Date()
        )
        #expect(voip.headers.first { $0.0 == "apns-topic" }?.1 == "com.example.PushChat.voip", "Apple's suffix for VoIP")
    }

    /// The provider token checked as Apple would, with nothing of the project's: base64url by hand, JSON by
    /// Foundation, the ES256 signature by swift-crypto over `header.claims`.
    @Test func theProviderTokenVerifiesIndependently() throws {
        let key = P256.Signing.PrivateKey()
        let token = try ProviderTokenSigner(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", key: key)
            .token(issuedAt: Date(timeIntervalSince1970: 1_900_000_000))
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3)
        func decode(_ part: String) throws -> Data {
            #expect(!part.contains("=") && !part.contains("+") && !part.contains("/"), "base64url without padding")
            var base64 = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
            return try #require(Data(base64Encoded: base64))
        }
        let header = try #require(try JSONSerialization.jsonObject(with: decode(parts[0])) as? [String: Any])
        #expect(header.count == 2)
        #expect(header["alg"] as? String == "ES256")
        #expect(header["kid"] as? String == "ABC123DEFG")
        let claims = try #require(try JSONSerialization.jsonObject(with: decode(parts[1])) as? [String: Any])
        #expect(claims.count == 2)
        #expect(claims["iss"] as? String == "DEF123GHIJ")
        #expect((claims["iat"] as? NSNumber)?.int64Value == 1_900_000_000)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: decode(parts[2]))
        #expect(try decode(parts[2]).count == 64, "r and s, 32 bytes each (JWS), not DER")
        #expect(key.publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)))
        #expect(!P256.Signing.PrivateKey().publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)))
    }
}
