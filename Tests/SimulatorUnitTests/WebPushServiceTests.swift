import Crypto
import Foundation
import Support
import Testing
import WebPush

@testable import Simulator

/// The simulator's push service, as a push service checks a message, without sockets.
@Suite struct WebPushServiceTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// A service with its origin set, a browser subscribed with `vapid`'s key, and the subscription as a sender reads it.
    static func subscribed(
        _ vapid: VAPIDKey,
        options: SimulatorConfiguration.WebPushOptions = .init()
    ) throws -> (WebPushService, WebPushSubscription, String) {
        let service = WebPushService(options: options)
        service.origin = "https://127.0.0.1:8443"
        let json = service.subscribe(app: "beta", applicationServerKey: vapid.publicKey)
        let subscription = try WebPushSubscription(json: Array(json.utf8))
        return (service, subscription, subscription.endpoint.path)
    }

    static func headers(_ vapid: VAPIDKey, audience: String = "https://127.0.0.1:8443", ttl: String? = "60") throws -> [String: String] {
        var headers = [
            "authorization": try VAPIDToken(
                audience: audience,
                expires: Int64(now.timeIntervalSince1970) + 3600,
                subject: "mailto:ops@example.com"
            )
            .authorization(signedWith: vapid),
            "content-encoding": "aes128gcm",
        ]
        if let ttl { headers["ttl"] = ttl }
        return headers
    }

    @Test func aMessageIsDeliveredAsTheBrowserReadsIt() throws {
        let vapid = VAPIDKey.generate()
        let (service, subscription, path) = try Self.subscribed(vapid)
        #expect(subscription.origin == "https://127.0.0.1:8443" && path.hasPrefix("/push/"))
        let message = WebPushMessage(title: "Ann", body: "lunch?", navigate: "https://chat.example/")
        let body = try ContentEncryption.encrypt(Array(message.json.utf8), for: subscription)
        var headers = try Self.headers(vapid)
        headers["urgency"] = "high"
        headers["topic"] = "room-1"
        let answer = service.receive(path: path, headers: headers, body: body, now: Self.now)
        #expect(answer.status == 201, "\(answer.reason)")
        let delivered = try #require(answer.delivered)
        #expect(delivered.format == "web" && delivered.topic == "beta" && delivered.collapseID == "room-1" && delivered.priority == 10)
        #expect(WebPushMessage(json: Array(delivered.payload.utf8)) == message)
        let screen = LockScreenItem(delivered)
        #expect(screen.web && screen.title == "Ann" && screen.body == "lunch?" && screen.app == "beta")
    }

    @Test func whatAPushServiceRefuses() throws {
        let vapid = VAPIDKey.generate()
        let (service, subscription, path) = try Self.subscribed(vapid)
        let body = try ContentEncryption.encrypt(Array("{}".utf8), for: subscription)
        func status(_ path: String, _ headers: [String: String], _ body: [UInt8]) -> Int {
            service.receive(path: path, headers: headers, body: body, now: Self.now).status
        }
        let good = try Self.headers(vapid)
        #expect(status("/push/nobody", good, body) == 404)
        #expect(status(path, [:], body) == 401, "no VAPID")
        #expect(status(path, try Self.headers(vapid, audience: "https://push.example.net"), body) == 401, "another audience")
        #expect(status(path, try Self.headers(VAPIDKey.generate()), body) == 403, "another key than the subscription's")
        #expect(status(path, try Self.headers(vapid, ttl: nil), body) == 400, "no TTL")
        var encoding = good
        encoding["content-encoding"] = "aesgcm"
        #expect(status(path, encoding, body) == 400, "the old aesgcm")
        var topic = good
        topic["topic"] = String(repeating: "a", count: 33)
        #expect(status(path, topic, body) == 400)
        #expect(status(path, good, Array(repeating: 0, count: 4_097)) == 413)
        #expect(
            status(path, good, try ContentEncryption.encrypt(Array("{}".utf8), for: Self.otherBrowser())) == 400,
            "not for this browser"
        )
        #expect(status(path, good, body) == 201)
        #expect(service.unsubscribe(String(path.dropFirst("/push/".count))))
        #expect(status(path, good, body) == 410, "unsubscribed")
    }

    @Test func aForcedAnswer() throws {
        let vapid = VAPIDKey.generate()
        var options = SimulatorConfiguration.WebPushOptions()
        options.answer = 429
        let (service, subscription, path) = try Self.subscribed(vapid, options: options)
        let answer = service.receive(
            path: path,
            headers: try Self.headers(vapid),
            body: try ContentEncryption.encrypt(Array("{}".utf8), for: subscription),
            now: Self.now
        )
        #expect(answer.status == 429 && answer.retryAfter == 1 && answer.delivered == nil)
    }

    static func otherBrowser() throws -> WebPushSubscription {
        try WebPushSubscription(
            endpoint: URL(string: "https://127.0.0.1:8443/push/x")!,
            userAgentKey: P256.KeyAgreement.PrivateKey().publicKey,
            authSecret: Array(repeating: 1, count: 16)
        )
    }
}
