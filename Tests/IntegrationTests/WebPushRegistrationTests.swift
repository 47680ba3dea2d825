import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Testing

@testable import API
@testable import Settings
@testable import Storage
@testable import Support
@testable import WebPush

/// Browsers as the third platform (issue 46), the API's side against PostgreSQL: a subscription registered through the
/// provider API and the chat API (`platform=web`), stored in `web_subscriptions` under its derived token; every
/// refusal (not https, inside the network, keys that are not keys) a 400 that writes nothing; and what the queue holds
/// for a browser: the Declarative Web Push JSON of a chat message or a notification, or a refusal with its reason.
@Suite struct WebPushRegistrationTests {
    /// A browser's subscription JSON on `endpoint`, with fresh keys (as `PushSubscription.toJSON()` gives it).
    static func subscription(_ endpoint: String, p256dh: String? = nil, auth: String? = nil) -> String {
        let key = p256dh ?? Base64URL.encode(Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation))
        let secret = auth ?? Base64URL.encode((0..<16).map { _ in UInt8.random(in: 0...255) })
        return #"{"endpoint":"\#(endpoint)","expirationTime":null,"keys":{"p256dh":"\#(key)","auth":"\#(secret)"}}"#
    }

    /// The endpoint the tests' "push service" lives at: loopback, listed in `webpush_private_hosts`.
    static let listed = "127.0.0.1:8443"

    static func configuration(_ url: DatabaseURL) -> Configuration {
        var configuration = APIHarness.configuration(url: TestDatabase.service(url))
        configuration.webPush.privateHosts = [listed]
        // APNs' HTTP/2 limit (4 KB), so that a browser's is what a large notification meets first.
        configuration.apns.transport = .http2
        return configuration
    }

    static func run(_ body: @escaping @Sendable (APIHarness) async throws -> Void) async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await APIHarness.run(configuration: configuration(url), ownerURL: url, body)
        }
    }

    static func subscriptions(_ api: APIHarness) async throws -> String {
        try await TestDatabase.scalar(
            api.url,
            "SELECT coalesce(string_agg(concat_ws(' ', device_token, endpoint, p256dh, auth), ',' ORDER BY device_token), '-') FROM web_subscriptions",
            as: String.self
        )
    }

    @Test func aBrowserRegistersThroughTheProviderAPIByItsSubscription() async throws {
        try await Self.run { api in
            let key = try await ProviderAPITests.createKey(api.url)
            let endpoint = "https://\(Self.listed)/push/browser-1"
            let first = Self.subscription(endpoint)
            let registered = try await ProviderAPITests.call(
                api,
                .post,
                "/v1/devices",
                key: key,
                #"{"platform": "web", "subscription": \#(first), "user": "carol"}"#
            )
            let token = WebPushSubscription.token(endpoint: endpoint)
            #expect(registered.status == 201, "\(registered.json)")
            #expect(registered.json["token"] as? String == token && registered.json["platform"] as? String == "web", "\(registered.json)")
            #expect(token.count == 47 && token.hasPrefix("web_"))
            let parsed = try WebPushSubscription(json: Array(first.utf8))
            #expect(try await Self.subscriptions(api) == "\(token) \(endpoint) \(parsed.p256dh) \(parsed.auth)")
            // The same endpoint subscribed again with new keys: the same device, the keys replaced.
            let second = Self.subscription(endpoint)
            let again = try await ProviderAPITests.call(
                api,
                .post,
                "/v1/devices",
                key: key,
                #"{"platform": "web", "subscription": \#(second), "user": "carol"}"#
            )
            #expect(again.status == 200 && again.json["token"] as? String == token, "\(again.json)")
            let renewed = try WebPushSubscription(json: Array(second.utf8))
            #expect(try await Self.subscriptions(api) == "\(token) \(endpoint) \(renewed.p256dh) \(renewed.auth)")
            // Listed by user, removed by its token.
            let listed = try await ProviderAPITests.call(api, .get, "/v1/devices?user=carol", key: key)
            #expect("\(listed.json)".contains(token), "\(listed.json)")
            #expect(try await ProviderAPITests.call(api, .delete, "/v1/devices/\(token)", key: key).status == 204)
            #expect(try await api.count("devices") == 0)
        }
    }

    @Test func aSubscriptionThatIsNotABrowsersOrPointsInsideTheNetworkIsRefusedWithNothingWritten() async throws {
        try await Self.run { api in
            let key = try await ProviderAPITests.createKey(api.url)
            let before = try await ProviderAPITests.snapshot(api)
            let good = Self.subscription("https://\(Self.listed)/push/x")
            let offCurve = Base64URL.encode([0x04] + [UInt8](repeating: 1, count: 64))
            for (body, field, reason) in [
                (#"{"platform": "web", "subscription": \#(Self.subscription("http://\(Self.listed)/push/x"))}"#, "subscription", "https"),
                (
                    #"{"platform": "web", "subscription": \#(Self.subscription("https://127.0.0.1:9443/push/x"))}"#,
                    "subscription.endpoint", "inside the network"
                ),
                (
                    #"{"platform": "web", "subscription": \#(Self.subscription("https://169.254.169.254/push/x"))}"#,
                    "subscription.endpoint", "inside the network"
                ),
                (
                    #"{"platform": "web", "subscription": \#(Self.subscription("https://[fd00::1]/push/x"))}"#, "subscription.endpoint",
                    "inside the network"
                ),
                (
                    #"{"platform": "web", "subscription": \#(Self.subscription("https://10.1.2.3/push/x"))}"#, "subscription.endpoint",
                    "inside the network"
                ),
                (
                    #"{"platform": "web", "subscription": \#(Self.subscription("https://localhost:8443/push/x"))}"#,
                    "subscription.endpoint", "inside the network"
                ),
                (
                    #"{"platform": "web", "subscription": \#(Self.subscription("https://\(Self.listed)/x", p256dh: offCurve))}"#,
                    "subscription", "P-256"
                ),
                (
                    #"{"platform": "web", "subscription": \#(Self.subscription("https://\(Self.listed)/x", auth: Base64URL.encode([UInt8](repeating: 7, count: 15))))}"#,
                    "subscription", "16 bytes"
                ),
                (#"{"platform": "web", "subscription": "\#(Self.listed)"}"#, "subscription", "object"),
                (#"{"platform": "web"}"#, "subscription", "PushSubscription.toJSON()"),
                (#"{"platform": "web", "token": "web_x", "subscription": \#(good)}"#, "token", "derived"),
                (#"{"platform": "apns", "token": "\#(ProviderAPITests.token(1))", "subscription": \#(good)}"#, "subscription", "browser"),
                (#"{"platform": "browser", "subscription": \#(good)}"#, "platform", "web"),
            ] {
                let refused = try await ProviderAPITests.call(api, .post, "/v1/devices", key: key, body)
                #expect(refused.status == 400, "\(body): \(refused.json)")
                #expect(refused.json["field"] as? String == field, "\(body): \(refused.json)")
                #expect((refused.json["reason"] as? String ?? "").contains(reason), "\(body): \(refused.json)")
            }
            #expect(try await ProviderAPITests.snapshot(api) == before)
            #expect(try await Self.subscriptions(api) == "-")
            // A web token is taken where tokens are named; a malformed one is refused.
            #expect(try await ProviderAPITests.call(api, .delete, "/v1/devices/web_short", key: key).status == 400)
            let unknown = WebPushSubscription.token(endpoint: "https://push.example/none")
            #expect(try await ProviderAPITests.call(api, .delete, "/v1/devices/\(unknown)", key: key).status == 404)
        }
    }

    @Test func aBrowserJoinsTheChatAndGetsTheRoomsMessagesAsDeclarativeWebPush() async throws {
        try await Self.run { api in
            let endpoint = "https://\(Self.listed)/push/chat-1"
            let subscription = Self.subscription(endpoint)
            let joined = try await api.post([
                "cmd": "join", "udid": Device.udid(1), "platform": "web", "token": subscription, "name": "Wendy \"W\"", "code": "room",
            ])
            #expect(joined.status == .ok, "\(String(buffer: joined.body))")
            let token = WebPushSubscription.token(endpoint: endpoint)
            let row = try await TestDatabase.scalar(
                api.url,
                "SELECT concat_ws(' ', platform, device_token) FROM active_users WHERE udid = \(Device.udid(1))",
                as: String.self
            )
            #expect(row == "web \(token)")
            #expect(try await Self.subscriptions(api).hasPrefix(token + " " + endpoint))
            // An iPhone in the room sends; the browser's row holds the message for it, the iPhone's sender name its title.
            #expect(
                try await api.post([
                    "cmd": "join", "udid": Device.udid(2), "token": ProviderAPITests.token(9), "name": "Ann", "code": "room",
                ]).status == .ok
            )
            let sent = try await api.post(["cmd": "message", "udid": Device.udid(2), "text": "Hello \"browser\" ✓"])
            #expect(sent.status == .ok, "\(sent.text) \(sent.errorDescription ?? "")")
            let payload = try await TestDatabase.scalar(
                api.url,
                "SELECT payload FROM push_deliveries WHERE platform = 'web' AND device_token = \(token)",
                as: String.self
            )
            let message = try #require(WebPushMessage(json: Array(payload.utf8)), "\(payload)")
            #expect(message.title == "Ann" && message.body == "Hello \"browser\" ✓" && message.navigate == "/", "\(payload)")
            // The browser sends: the iPhone's row is APNs' JSON with the browser's name.
            #expect(try await api.post(["cmd": "message", "udid": Device.udid(1), "text": "hi"]).status == .ok)
            let apns = try await TestDatabase.scalar(
                api.url,
                "SELECT payload FROM push_deliveries WHERE platform = 'apns' ORDER BY message_id DESC LIMIT 1",
                as: String.self
            )
            #expect(apns == #"{"aps":{"alert":"Wendy \"W\": hi","sound":"default"}}"#)
            // cmd=update with a new subscription (another endpoint): the new token, its keys stored.
            let moved = "https://\(Self.listed)/push/chat-2"
            #expect(
                try await api.post(["cmd": "update", "udid": Device.udid(1), "platform": "web", "token": Self.subscription(moved)]).status
                    == .ok
            )
            let updated = try await TestDatabase.scalar(
                api.url,
                "SELECT device_token FROM active_users WHERE udid = \(Device.udid(1))",
                as: String.self
            )
            #expect(updated == WebPushSubscription.token(endpoint: moved))
            #expect(try await Self.subscriptions(api).contains(moved))
        }
    }

    @Test func theChatAPIRefusesABrowsersBadSubscriptionWithItsReasonAndWritesNothing() async throws {
        try await Self.run { api in
            let before = try await api.snapshot()
            for (token, reason) in [
                (Self.subscription("https://127.0.0.1:9443/push/x"), "inside the network"),
                (Self.subscription("http://\(Self.listed)/push/x"), "https"),
                ("{\"endpoint\": 1}", "endpoint"),
                (ProviderAPITests.token(1), "PushSubscription.toJSON()"),
            ] {
                let refused = try await api.post([
                    "cmd": "join", "udid": Device.udid(3), "platform": "web", "token": token, "name": "B", "code": "room",
                ])
                #expect(refused.status == .badRequest, "\(token)")
                let description = refused.headers[HTTPField.Name("X-Error-Description")!] ?? ""
                #expect(description.hasPrefix("Invalid subscription: ") && description.contains(reason), "\(token): \(description)")
            }
            #expect(try await api.snapshot() == before)
            #expect(try await Self.subscriptions(api) == "-")
        }
    }

    @Test func aNotificationReachesBrowsersAsDeclarativeWebPushOrIsRefusedWithItsReason() async throws {
        try await Self.run { api in
            let key = try await ProviderAPITests.createKey(api.url)
            let endpoint = "https://\(Self.listed)/push/n-1"
            let registered = try await ProviderAPITests.call(
                api,
                .post,
                "/v1/devices",
                key: key,
                #"{"platform": "web", "subscription": \#(Self.subscription(endpoint)), "user": "dora"}"#
            )
            #expect(registered.status == 201, "\(registered.json)")
            _ = try await ProviderAPITests.call(
                api,
                .post,
                "/v1/devices",
                key: key,
                #"{"token": "\#(ProviderAPITests.token(2))", "user": "dora"}"#
            )
            let sent = try await ProviderAPITests.call(
                api,
                .post,
                "/v1/notifications",
                key: key,
                #"{"to": {"users": ["dora"]}, "notification": {"title": "Build", "body": "green"}, "data": {"run": 42}, "collapse_id": "ci", "web": {"navigate": "/runs/42"}}"#
            )
            #expect(sent.status == 202 && sent.json["recipients"] as? Int == 2, "\(sent.json)")
            let payload = try await TestDatabase.scalar(
                api.url,
                "SELECT payload FROM push_deliveries WHERE platform = 'web'",
                as: String.self
            )
            #expect(
                payload
                    == #"{"web_push":8030,"notification":{"title":"Build","body":"green","navigate":"/runs/42","tag":"ci","data":{"run":42}}}"#
            )
            // A token list names the browser by its token.
            let byToken = try await ProviderAPITests.call(
                api,
                .post,
                "/v1/notifications",
                key: key,
                #"{"to": {"tokens": ["\#(WebPushSubscription.token(endpoint: endpoint))"]}, "aps": {"alert": "plain"}}"#
            )
            #expect(byToken.status == 202, "\(byToken.json)")
            let last = try await TestDatabase.scalar(
                api.url,
                "SELECT concat_ws(' ', platform, payload) FROM push_deliveries ORDER BY message_id DESC LIMIT 1",
                as: String.self
            )
            #expect(last == #"web {"web_push":8030,"notification":{"title":"plain","navigate":"/"}}"#)
            // Nothing a browser can show, or more than it can be sent: refused while a browser is among the recipients.
            let before = try await ProviderAPITests.snapshot(api)
            let big = String(repeating: "b", count: 4000)
            for (body, field, reason) in [
                (#"{"to": {"users": ["dora"]}, "aps": {"content-available": 1}, "data": {"k": "v"}}"#, "notification", "browser"),
                (#"{"to": {"users": ["dora"]}, "notification": {"title": "t"}, "data": {"k": "\#(big)"}}"#, "data", "4,096"),
                (
                    #"{"to": {"users": ["dora"]}, "notification": {"title": "t"}, "web": {"navigate": "javascript:alert(1)"}}"#,
                    "web.navigate", "https"
                ),
                (#"{"to": {"users": ["dora"]}, "notification": {"title": "t"}, "web": {"icon": "x"}}"#, "web.icon", "navigate"),
            ] {
                let refused = try await ProviderAPITests.call(api, .post, "/v1/notifications", key: key, body)
                #expect(refused.status == 400, "\(body.prefix(90)): \(refused.json)")
                #expect(refused.json["field"] as? String == field, "\(body.prefix(90)): \(refused.json)")
                #expect((refused.json["reason"] as? String ?? "").contains(reason), "\(body.prefix(90)): \(refused.json)")
            }
            #expect(try await ProviderAPITests.snapshot(api) == before)
            // The same silent push to the iPhone alone is fine: only a browser among the recipients refuses it.
            let phoneOnly = try await ProviderAPITests.call(
                api,
                .post,
                "/v1/notifications",
                key: key,
                #"{"to": {"tokens": ["\#(ProviderAPITests.token(2))"]}, "aps": {"content-available": 1}, "data": {"k": "v"}}"#
            )
            #expect(phoneOnly.status == 202, "\(phoneOnly.json)")
        }
    }
}
