import Crypto
import Foundation
import Testing

@testable import Support
@testable import WebPush

/// The aes128gcm content coding with Web Push's keys, from RFC 8291 Appendix A.
@Suite struct ContentEncryptionTests {
    /// RFC 8291 Appendix A, every value as the RFC prints it (base64url).
    enum Appendix {
        static let plaintext = "When I grow up, I want to be a watermelon"
        static let senderPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
        static let senderPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
        static let userAgentPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
        static let userAgentPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
        static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
        static let authSecret = "BTBZMqHH6r4Tts7J_aSIgg"
        static let ecdhSecret = "kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs"
        static let authenticationPRK = "Snr3JMxaHVDXHWJn5wdC52WjpCtd2EIEGBykDcZW32k"
        static let inputKeyingMaterial = "S4lYMb_L0FxCeq0WhDx813KgSYqU26kOyzWUdsXYyrg"
        static let pseudoRandomKey = "09_eUZGrsvxChDCGRCdkLiDXrReGOEVeSCdCcPBSJSc"
        static let contentEncryptionKey = "oIhVW04MRdy2XN9CiKLxTg"
        static let nonce = "4h_95klXJ5E_qnoN"
        static let body =
            "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
    }

    static func bytes(_ text: String) -> [UInt8] { Base64URL.decode(text)! }

    static func appendixSubscription() throws -> WebPushSubscription {
        try WebPushSubscription(
            json: Array(
                #"{"endpoint":"https://push.example.net/push/JzLQ3raZJfFBR0aqvOMsLrt54w4rJUsV","keys":{"p256dh":"\#(Appendix.userAgentPublic)","auth":"\#(Appendix.authSecret)"}}"#
                    .utf8
            )
        )
    }

    @Test func theAppendixKeysStepByStep() throws {
        let sender = try P256.KeyAgreement.PrivateKey(rawRepresentation: Self.bytes(Appendix.senderPrivate))
        #expect(Base64URL.encode(Array(sender.publicKey.x963Representation)) == Appendix.senderPublic)
        let userAgent = try P256.KeyAgreement.PublicKey(x963Representation: Self.bytes(Appendix.userAgentPublic))
        let shared = try sender.sharedSecretFromKeyAgreement(with: userAgent).withUnsafeBytes { Array($0) }
        #expect(Base64URL.encode(shared) == Appendix.ecdhSecret)
        let keys = ContentEncryption.Keys(
            ecdhSecret: shared,
            authSecret: Self.bytes(Appendix.authSecret),
            userAgentPublic: Self.bytes(Appendix.userAgentPublic),
            senderPublic: Self.bytes(Appendix.senderPublic),
            salt: Self.bytes(Appendix.salt)
        )
        #expect(Base64URL.encode(keys.authenticationPRK) == Appendix.authenticationPRK)
        #expect(Base64URL.encode(keys.inputKeyingMaterial) == Appendix.inputKeyingMaterial)
        #expect(Base64URL.encode(keys.pseudoRandomKey) == Appendix.pseudoRandomKey)
        #expect(Base64URL.encode(keys.contentEncryptionKey) == Appendix.contentEncryptionKey)
        #expect(Base64URL.encode(keys.nonce) == Appendix.nonce)
    }

    @Test func theAppendixBodyByteForByte() throws {
        let body = try ContentEncryption.encrypt(
            Array(Appendix.plaintext.utf8),
            for: try Self.appendixSubscription(),
            sender: try P256.KeyAgreement.PrivateKey(rawRepresentation: Self.bytes(Appendix.senderPrivate)),
            salt: Self.bytes(Appendix.salt)
        )
        #expect(Base64URL.encode(body) == Appendix.body)
        #expect(body.count == 144, "RFC 8291 §5: the example's body is 144 bytes")
    }

    @Test func aBrowserReadsTheAppendixBody() throws {
        let userAgent = try P256.KeyAgreement.PrivateKey(rawRepresentation: Self.bytes(Appendix.userAgentPrivate))
        let plaintext = try ContentEncryption.decrypt(
            Self.bytes(Appendix.body),
            userAgentKey: userAgent,
            authSecret: Self.bytes(Appendix.authSecret)
        )
        #expect(String(decoding: plaintext, as: UTF8.self) == Appendix.plaintext)
        var tampered = Self.bytes(Appendix.body)
        tampered[100] ^= 1
        #expect(throws: WebPushError.self) {
            try ContentEncryption.decrypt(tampered, userAgentKey: userAgent, authSecret: Self.bytes(Appendix.authSecret))
        }
        #expect(throws: WebPushError.self, "another auth secret") {
            try ContentEncryption.decrypt(Self.bytes(Appendix.body), userAgentKey: userAgent, authSecret: Array(repeating: 7, count: 16))
        }
    }

    /// Each message has its own key pair and salt: the same plaintext never gives the same body.
    @Test func freshKeysAndSaltPerMessage() throws {
        let subscription = try Self.appendixSubscription()
        let first = try ContentEncryption.encrypt(Array("hello".utf8), for: subscription)
        let second = try ContentEncryption.encrypt(Array("hello".utf8), for: subscription)
        #expect(first[0..<16] != second[0..<16], "salt")
        #expect(first[21..<86] != second[21..<86], "the sender's public key")
        let userAgent = try P256.KeyAgreement.PrivateKey(rawRepresentation: Self.bytes(Appendix.userAgentPrivate))
        for body in [first, second] {
            #expect(
                try ContentEncryption.decrypt(body, userAgentKey: userAgent, authSecret: subscription.authSecret) == Array("hello".utf8)
            )
        }
    }

    /// 3,993 bytes fill a 4,096-byte body; one more is refused with a reason.
    @Test func theLargestMessage() throws {
        let subscription = try Self.appendixSubscription()
        let largest = try ContentEncryption.encrypt(Array(repeating: UInt8(ascii: "x"), count: 3_993), for: subscription)
        #expect(largest.count == 4_096)
        let error = #expect(throws: WebPushError.self) {
            try ContentEncryption.encrypt(Array(repeating: UInt8(ascii: "x"), count: 3_994), for: subscription)
        }
        #expect(error?.code == .tooLarge)
        #expect(error?.reason.contains("3993") == true)
    }

    /// An implementation that is not this project's (Python's http_ece, on the `cryptography` package) decrypts what
    /// this one encrypts for a fresh browser key.
    @Test func pythonsHTTPECEDecryptsIt() throws {
        let userAgent = P256.KeyAgreement.PrivateKey()
        let auth = (0..<16).map { _ in UInt8.random(in: 0...255) }
        let subscription = try WebPushSubscription(
            endpoint: URL(string: "https://push.example.net/wpush/v2/abc")!,
            userAgentKey: userAgent.publicKey,
            authSecret: auth
        )
        let plaintext = Array(WebPushMessage(title: "Ann", body: "the soup is ready ✓", navigate: "https://chat.example/").json.utf8)
        let body = try ContentEncryption.encrypt(plaintext, for: subscription)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("decrypt_webpush.py").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let request =
            #"{"body":"\#(Base64URL.encode(body))","ua_private":"\#(Base64URL.encode(Array(userAgent.rawRepresentation)))","auth":"\#(Base64URL.encode(auth))"}"#
            + "\n"
        input.fileHandleForWriting.write(Data(request.utf8))
        try input.fileHandleForWriting.close()
        let answer = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "python3 with http_ece (scripts/test.sh installs it)")
        let json = try JSON.parse(Array(answer))
        #expect(json["plaintext"]?.stringValue.flatMap(Base64URL.decode) == plaintext)
    }
}
