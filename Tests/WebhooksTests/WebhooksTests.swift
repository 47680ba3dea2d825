import Foundation
import Testing

@testable import Support
@testable import Webhooks

/// Delivery events' protocol values, from the Standard Webhooks specification.
@Suite struct WebhooksTests {
    /// The specification's own example (its libraries' test vector), checked independently with Python's `hmac`:
    /// `base64(hmac.new(b64decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), b'msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}', sha256))`.
    @Test func theSpecificationsExampleSignature() throws {
        let secret = try WebhookSecret(parsing: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        let body = Array(#"{"test": 2432232314}"#.utf8)
        let header = WebhookSignature.header(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: body, secrets: [secret])
        #expect(header == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        let then = Date(timeIntervalSince1970: 1_614_265_330 + 60)
        #expect(
            WebhookSignature.verify(
                header: header,
                id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
                timestamp: 1_614_265_330,
                body: body,
                secret: secret,
                now: then
            )
        )
        #expect(
            !WebhookSignature.verify(header: header, id: "msg_other", timestamp: 1_614_265_330, body: body, secret: secret, now: then),
            "another id"
        )
        #expect(
            !WebhookSignature.verify(
                header: header,
                id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
                timestamp: 1_614_265_330,
                body: body + [0x20],
                secret: secret,
                now: then
            ),
            "another body"
        )
        let late = Date(timeIntervalSince1970: 1_614_265_330 + 301)
        #expect(
            !WebhookSignature.verify(
                header: header,
                id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
                timestamp: 1_614_265_330,
                body: body,
                secret: secret,
                now: late
            ),
            "more than five minutes off: a replay"
        )
    }

    @Test func duringARotationBothSecretsSignAndEitherVerifies() {
        let old = WebhookSecret.generate()
        let new = WebhookSecret.generate()
        #expect(old != new)
        let body = Array(#"{"events":[]}"#.utf8)
        let header = WebhookSignature.header(id: "evt_1", timestamp: 1_800_000_000, body: body, secrets: [new, old])
        let parts = header.split(separator: " ")
        #expect(parts.count == 2 && parts.allSatisfy { $0.hasPrefix("v1,") })
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        for secret in [old, new] {
            #expect(WebhookSignature.verify(header: header, id: "evt_1", timestamp: 1_800_000_000, body: body, secret: secret, now: now))
        }
        #expect(
            !WebhookSignature.verify(
                header: header,
                id: "evt_1",
                timestamp: 1_800_000_000,
                body: body,
                secret: WebhookSecret.generate(),
                now: now
            )
        )
    }

    @Test func secretsAreWhsecAndBase64OfTwentyFourToSixtyFourBytes() throws {
        let secret = WebhookSecret.generate()
        #expect(secret.bytes.count == 32)
        #expect(try WebhookSecret(parsing: secret.text) == secret, "what is printed reads back")
        #expect(!"\(secret)".contains(secret.text.dropFirst(6)), "never shown in logs")
        let short = "whsec_" + Data(repeating: 1, count: 23).base64EncodedString()
        let long = "whsec_" + Data(repeating: 1, count: 65).base64EncodedString()
        for text in ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", short, long] {
            let error = #expect(throws: WebhookError.self) { try WebhookSecret(parsing: text) }
            #expect(error?.code == .badSecret)
            #expect(error.map { !$0.description.contains(text) } == true, "the refused text is not echoed")
        }
    }

    @Test func eventsSerializeAsTheIssueSaysAtMostAThousandAPost() throws {
        let event = WebhookEvent(
            id: "evt_0001",
            type: .unregistered,
            timestamp: Date(timeIntervalSince1970: 1_800_000_000.25),
            data: [.init("notification_id", .string("n1")), .init("app", .string("default")), .init("status", .number("410"))]
        )
        let body = String(decoding: WebhookEvent.body([event]), as: UTF8.self)
        #expect(
            body
                == #"{"events":[{"id":"evt_0001","type":"device.unregistered","timestamp":"2027-01-15T08:00:00.250Z","data":{"notification_id":"n1","app":"default","status":410}}]}"#
        )
        #expect(try JSON.parse(body).members?.first?.key == "events", "valid JSON")
        #expect(WebhookEvent.rfc3339(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59.500Z")
    }

    @Test func eventListsAreCheckedAndTheDefaultLeavesOutSentAndChat() throws {
        #expect(try WebhookEventType.parseList("notification.failed, device.unregistered") == [.failed, .unregistered])
        #expect(!WebhookEventType.defaults.contains(.sent) && !WebhookEventType.defaults.contains(.chat))
        #expect(WebhookEventType.defaults.contains(.completed))
        let unknown = #expect(throws: WebhookError.self) { try WebhookEventType.parseList("notification.sent,notification.bounced") }
        #expect(unknown?.reason.contains("notification.bounced") == true && unknown?.reason.contains("device.unregistered") == true)
        #expect(throws: WebhookError.self) { try WebhookEventType.parseList(" , ") }
    }

    @Test func urlsAreHTTPSWithoutCredentialsAndNeverInsideTheNetworkUnlessListed() throws {
        let url = try WebhookURL(parsing: "https://hooks.example.com/pushchat?team=7")
        #expect(url.host == "hooks.example.com" && url.port == 443 && url.target == "/pushchat?team=7")
        #expect(try WebhookURL(parsing: "https://HOOKS.example.com:8443").target == "/")
        let refused: [(String, ErrorCode<WebhookError>)] = [
            ("ftp://example.com/", .badURL),
            ("http://hooks.example.com/", .badURL),
            ("https://user:pw@hooks.example.com/", .badURL),
            ("https://hooks.example.com/#x", .badURL),
            ("not a url", .badURL),
            ("https://127.0.0.1/hook", .insideNetwork),
            ("https://169.254.169.254/latest/meta-data", .insideNetwork),
            ("https://[::1]:8443/", .insideNetwork),
            ("https://[::ffff:10.0.0.1]/", .insideNetwork),
            ("https://10.0.0.8/", .insideNetwork),
        ]
        for (text, code) in refused {
            let error = #expect(throws: WebhookError.self, "\(text)") { try WebhookURL(parsing: text) }
            #expect(error?.code == code, "\(text): \(String(describing: error))")
        }
        // Listed host:port pairs: inside the network and over http, for tests and the operator's own receivers.
        let listed: Set<String> = ["127.0.0.1:9000", "[::1]:9001"]
        #expect(try WebhookURL(parsing: "http://127.0.0.1:9000/hook", privateHosts: listed).authority == "127.0.0.1:9000")
        #expect(try WebhookURL(parsing: "https://[::1]:9001/", privateHosts: listed).host == "::1")
        #expect(throws: WebhookError.self, "another port is not listed") {
            try WebhookURL(parsing: "http://127.0.0.1:9002/", privateHosts: listed)
        }
    }

    @Test func aNameIsJudgedByEveryAddressItResolvesTo() throws {
        let url = try WebhookURL(parsing: "https://hooks.example.com/")
        try url.check(resolved: [ClientAddress("93.184.216.34")!], privateHosts: [])
        let error = #expect(throws: WebhookError.self, "one public, one private: either could be reached") {
            try url.check(resolved: [ClientAddress("93.184.216.34")!, ClientAddress("192.168.0.5")!], privateHosts: [])
        }
        #expect(error?.code == .insideNetwork)
        #expect(throws: WebhookError.self, "resolves to nothing") { try url.check(resolved: [], privateHosts: []) }
        try url.check(resolved: [ClientAddress("127.0.0.1")!], privateHosts: ["hooks.example.com:443"])
    }

    @Test func retriesBackOffExponentiallyWithJitterWithinTheWindow() {
        let retry = WebhookRetry()
        #expect(retry.delay(afterAttempt: 1, jitter: 1) == .seconds(10))
        #expect(retry.delay(afterAttempt: 1, jitter: 0) == .seconds(5), "half at the least")
        #expect(retry.delay(afterAttempt: 4, jitter: 1) == .seconds(80))
        #expect(retry.delay(afterAttempt: 30, jitter: 1) == .seconds(6 * 3600), "capped")
        #expect(retry.delay(afterAttempt: 1000, jitter: 0.5) == .seconds(6 * 3600) * 0.75, "no overflow")
        #expect(!retry.givesUp(after: .seconds(3 * 24 * 3600 - 1)))
        #expect(retry.givesUp(after: .seconds(3 * 24 * 3600)))
    }
}
