import Crypto
import Foundation
import Testing

@testable import Support
@testable import WebPush

/// A browser's subscription as `PushSubscription.toJSON()` gives it, and what is refused.
@Suite struct WebPushSubscriptionTests {
    static let p256dh = ContentEncryptionTests.Appendix.userAgentPublic
    static let auth = ContentEncryptionTests.Appendix.authSecret

    static func parse(_ json: String) throws(WebPushError) -> WebPushSubscription { try WebPushSubscription(json: Array(json.utf8)) }

    @Test func whatABrowserGives() throws {
        let subscription = try Self.parse(
            #"{"endpoint":"https://fcm.googleapis.com/fcm/send/dGVzdA:APA91b","expirationTime":null,"keys":{"p256dh":"\#(Self.p256dh)","auth":"\#(Self.auth)"}}"#
        )
        #expect(subscription.origin == "https://fcm.googleapis.com")
        #expect(subscription.host == "fcm.googleapis.com" && subscription.port == 443)
        #expect(subscription.p256dh == Self.p256dh && subscription.auth == Self.auth)
        #expect(
            subscription.json
                == #"{"endpoint":"https://fcm.googleapis.com/fcm/send/dGVzdA:APA91b","keys":{"p256dh":"\#(Self.p256dh)","auth":"\#(Self.auth)"}}"#
        )
        #expect(try Self.parse(subscription.json) == subscription, "the stored form reads back")
        let padded = try Self.parse(
            #"{"endpoint":"https://[::1]:8443/push/1","keys":{"p256dh":"\#(Self.p256dh)=","auth":"\#(Self.auth)=="}}"#
        )
        #expect(padded.origin == "https://[::1]:8443" && padded.host == "::1" && padded.port == 8443)
    }

    @Test func refusals() {
        var offCurve = Base64URL.decode(Self.p256dh)!
        offCurve[64] ^= 1
        let compressed = [0x02] + Base64URL.decode(Self.p256dh)![1...32]
        let cases: [(String, String, WebPushError.Code)] = [
            ("not JSON", "endpoint=https://x", .badSubscription),
            ("no keys", #"{"endpoint":"https://push.example.net/1"}"#, .badSubscription),
            ("no auth", #"{"endpoint":"https://push.example.net/1","keys":{"p256dh":"\#(Self.p256dh)"}}"#, .badSubscription),
            ("http", #"{"endpoint":"http://push.example.net/1","keys":{"p256dh":"\#(Self.p256dh)","auth":"\#(Self.auth)"}}"#, .badEndpoint),
            ("no host", #"{"endpoint":"https:///1","keys":{"p256dh":"\#(Self.p256dh)","auth":"\#(Self.auth)"}}"#, .badEndpoint),
            (
                "credentials", #"{"endpoint":"https://u:p@push.example.net/1","keys":{"p256dh":"\#(Self.p256dh)","auth":"\#(Self.auth)"}}"#,
                .badEndpoint
            ),
            (
                "a point off the curve",
                #"{"endpoint":"https://push.example.net/1","keys":{"p256dh":"\#(Base64URL.encode(offCurve))","auth":"\#(Self.auth)"}}"#,
                .badKeys
            ),
            (
                "a compressed point",
                #"{"endpoint":"https://push.example.net/1","keys":{"p256dh":"\#(Base64URL.encode(Array(compressed)))","auth":"\#(Self.auth)"}}"#,
                .badKeys
            ),
            (
                "p256dh not base64url", #"{"endpoint":"https://push.example.net/1","keys":{"p256dh":"a+b/","auth":"\#(Self.auth)"}}"#,
                .badKeys
            ),
            (
                "auth of 15 bytes",
                #"{"endpoint":"https://push.example.net/1","keys":{"p256dh":"\#(Self.p256dh)","auth":"\#(Base64URL.encode(Array(repeating: 1, count: 15)))"}}"#,
                .badKeys
            ),
            (
                "a long endpoint",
                #"{"endpoint":"https://push.example.net/\#(String(repeating: "a", count: 1_100))","keys":{"p256dh":"\#(Self.p256dh)","auth":"\#(Self.auth)"}}"#,
                .badEndpoint
            ),
        ]
        for (name, json, code) in cases {
            let error = #expect(throws: WebPushError.self, Comment(rawValue: name)) { try Self.parse(json) }
            #expect(error?.code == code, Comment(rawValue: name))
        }
    }
}

/// Where an endpoint may point: the registration's and every send's check.
@Suite struct WebPushEndpointAddressTests {
    static func subscription(_ endpoint: String) throws -> WebPushSubscription {
        try WebPushSubscription(
            json: Array(
                #"{"endpoint":"\#(endpoint)","keys":{"p256dh":"\#(WebPushSubscriptionTests.p256dh)","auth":"\#(WebPushSubscriptionTests.auth)"}}"#
                    .utf8
            )
        )
    }

    @Test func insideTheNetworkIsRefusedUnlessListed() async throws {
        for endpoint in [
            "https://127.0.0.1:8443/push/1", "https://[::1]/push/1", "https://169.254.169.254/latest", "https://10.1.2.3/p",
            "https://[fd00::1]/p", "https://[::ffff:127.0.0.1]/p", "https://localhost:8443/push/1",
        ] {
            let subscription = try Self.subscription(endpoint)
            let error = await #expect(throws: WebPushError.self, Comment(rawValue: endpoint)) {
                _ = try await subscription.checkedAddresses(privateHosts: [])
            }
            #expect(
                error?.code == .insideNetwork && error?.reason.contains("webpush_private_hosts") == true,
                "\(endpoint): \(String(describing: error))"
            )
        }
        let listed = try Self.subscription("https://127.0.0.1:8443/push/1")
        #expect(try await listed.checkedAddresses(privateHosts: ["127.0.0.1:8443"]).count == 1)
        let listedV6 = try Self.subscription("https://[::1]:8443/push/1")
        #expect(try await listedV6.checkedAddresses(privateHosts: ["[::1]:8443"]).count == 1)
        #expect(throws: WebPushError.self, "another port is not listed") {
            try listed.check(resolved: [ClientAddress("127.0.0.1")!], privateHosts: ["127.0.0.1:9443"])
        }
        let outside = try Self.subscription("https://push.example.net/p")
        try outside.check(resolved: [ClientAddress("93.184.216.34")!], privateHosts: [])
        #expect(throws: WebPushError.self, "one public and one private address") {
            try outside.check(resolved: [ClientAddress("93.184.216.34")!, ClientAddress("192.168.1.1")!], privateHosts: [])
        }
        #expect(throws: WebPushError.self, "a name that resolves to nothing") { try outside.check(resolved: [], privateHosts: []) }
    }
}
