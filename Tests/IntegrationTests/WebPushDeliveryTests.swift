import Foundation
import PostgresNIO
import Testing

@testable import Observability
@testable import Push
@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support
@testable import WebPush

/// The Web Push sender against the simulator's push service: real HTTP/2 and TLS on loopback, rows and subscriptions
/// from PostgreSQL, messages the simulator's browsers decrypt with their own keys and VAPID tokens it verifies; each
/// of a push service's answers handled as the issue says, checked in the database and at the simulator.
@Suite(.serialized) struct WebPushDeliveryTests {
    /// A simulator with its push service, a VAPID key file, and the daemon's configuration sending to browsers (the
    /// simulator's loopback origin listed as a private host, its CA trusted).
    static func run(
        _ options: SimulatorConfiguration.WebPushOptions = .init(),
        _ body: @Sendable (PushHarness, _ configuration: Configuration, _ key: VAPIDKey) async throws -> Void
    ) async throws {
        let key = VAPIDKey.generate()
        let file = NSTemporaryDirectory() + "pushchat-vapid-\(UUID().uuidString).pem"
        try key.pem.write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        var simulator = SimulatorTests.configuration()
        simulator.webPushPort = 0
        simulator.webPush = options
        try await PushHarness.run(simulator: simulator) { harness in
            var configuration = harness.configuration()
            configuration.webPush.vapidKeyFile = file
            configuration.webPush.subject = "mailto:ops@example.com"
            configuration.webPush.caFile = TestCertificates.path("ca.pem")
            configuration.webPush.privateHosts = ["127.0.0.1:\(try #require(harness.ports.webPush))"]
            configuration.push.requestTimeout = .seconds(2)
            try await body(harness, configuration, key)
        }
    }

    static func withDaemon(_ harness: PushHarness, _ configuration: Configuration, _ body: @Sendable () async throws -> Void) async throws {
        let services = try PushService.services(
            configuration: configuration,
            logger: TestDatabase.logger,
            instance: "test-webpush-daemon",
            metrics: MetricsRegistry()
        )
        try await harness.withServices(services, body)
    }

    /// A browser of the simulator subscribed with `key` (nil: with the key the daemon signs with), stored as the API
    /// stores it; its token, and the id the simulator knows it by.
    static func subscribe(_ harness: PushHarness, _ key: VAPIDKey) async throws -> (token: String, id: String) {
        let json = harness.simulator.state.webPush.subscribe(app: "default", applicationServerKey: key.publicKey)
        let subscription = try WebPushSubscription(json: Array(json.utf8))
        try await store(harness, token: subscription.token, endpoint: subscription.endpoint.absoluteString, subscription: subscription)
        return (subscription.token, String(subscription.endpoint.path.split(separator: "/").last ?? ""))
    }

    static func store(_ harness: PushHarness, token: String, endpoint: String, subscription: WebPushSubscription) async throws {
        try await TestDatabase.withConnection(harness.url) { connection in
            try await connection.query(
                """
                INSERT INTO web_subscriptions (device_token, endpoint, p256dh, auth)
                VALUES (\(token), \(endpoint), \(subscription.p256dh), \(subscription.auth))
                """,
                logger: TestDatabase.logger
            )
        }
    }

    /// Queues a web row for each token with a Declarative Web Push message naming it.
    static func queue(_ harness: PushHarness, _ tokens: [String], priority: Int? = nil, collapseID: String? = nil) async throws {
        try await TestDatabase.withConnection(harness.url) { connection in
            try await connection.query(
                """
                INSERT INTO push_queue (platform, device_token, payload, priority, collapse_id)
                SELECT 'web', t, '{"web_push":8030,"notification":{"title":"Ann","body":"hi ' || t || '","navigate":"/"}}',
                       \(priority.map(Int16.init)), \(collapseID)
                FROM unnest(\(tokens)::text[]) t
                """,
                logger: TestDatabase.logger
            )
        }
    }

    @Test func browsersGetTheirMessagesEncryptedSignedAndOnceBesideTheIPhones() async throws {
        try await Self.run { harness, configuration, key in
            var browsers: [(token: String, id: String)] = []
            for _ in 0..<30 { browsers.append(try await Self.subscribe(harness, key)) }
            try await Self.queue(harness, browsers.map(\.token), priority: 10, collapseID: "room-1")
            try await harness.queue(10, from: 1)
            try await Self.withDaemon(harness, configuration) {
                try await harness.waitUntilAllSent(40)
            }
            let web = harness.simulator.state.accepted.filter { $0.format == "web" }
            #expect(web.count == 30 && Set(web.map(\.token)) == Set(browsers.map(\.id)), "each browser once")
            for browser in browsers {
                let got = try #require(web.first { $0.token == browser.id })
                // The simulator's browser decrypted it with its own keys: the queued JSON, byte for byte.
                #expect(got.payload == #"{"web_push":8030,"notification":{"title":"Ann","body":"hi \#(browser.token)","navigate":"/"}}"#)
                #expect(got.priority == 10 && got.collapseID == "room-1", "Urgency high, Topic the collapse id")
            }
            #expect(harness.simulator.state.accepted.count == 40, "and each iPhone row once, at APNs")
            #expect(try await harness.count("platform = 'web' AND time_sent IS NOT NULL") == 30)
        }
    }

    /// A push service that speaks only HTTP/1.1 (its TLS chooses it over ALPN): the first connection sends nothing,
    /// the rows go again over HTTP/1.1, each browser gets its message once, and its answers mean what they mean over
    /// HTTP/2 (an unsubscribed browser's 410).
    @Test func aPushServiceWithoutHTTP2GetsItsMessagesOverHTTP1() async throws {
        var options = SimulatorConfiguration.WebPushOptions()
        options.http1Only = true
        try await Self.run(options) { harness, configuration, key in
            var browsers: [(token: String, id: String)] = []
            for _ in 0..<20 { browsers.append(try await Self.subscribe(harness, key)) }
            let unsubscribed = try await Self.subscribe(harness, key)
            #expect(harness.simulator.state.webPush.unsubscribe(unsubscribed.id))
            try await Self.queue(harness, browsers.map(\.token) + [unsubscribed.token], priority: 5)
            try await Self.withDaemon(harness, configuration) {
                try await harness.waitUntil("every row has a result") {
                    try await harness.count("time_sent IS NOT NULL OR time_failed IS NOT NULL") == 21
                }
            }
            let web = harness.simulator.state.accepted.filter { $0.format == "web" }
            #expect(web.count == 20 && Set(web.map(\.token)) == Set(browsers.map(\.id)), "each browser once")
            #expect(web.allSatisfy { $0.priority == 5 }, "Urgency normal")
            #expect(try await harness.count("platform = 'web' AND time_sent IS NOT NULL") == 20)
            let gone = try await TestDatabase.scalar(
                harness.url,
                "SELECT last_status FROM push_deliveries WHERE device_token = \(unsubscribed.token)",
                as: String.self
            )
            #expect(gone == "410")
        }
    }

    @Test func eachAnswerOfAPushServiceIsRecordedAsItMeans() async throws {
        try await Self.run { harness, configuration, key in
            let good = try await Self.subscribe(harness, key)
            let unsubscribed = try await Self.subscribe(harness, key)
            #expect(harness.simulator.state.webPush.unsubscribe(unsubscribed.id))
            // Subscribed with another application server key: 403 from the push service.
            let otherKey = try await Self.subscribe(harness, VAPIDKey.generate())
            // A subscription pruned since its row was queued.
            let gone = WebPushSubscription.token(endpoint: "https://push.example/gone")
            // A subscription whose endpoint points inside the network and is not listed (written around the API).
            let port = try #require(harness.ports.webPush)
            let insideEndpoint = "https://127.0.0.2:\(port)/push/x"
            let inside = WebPushSubscription.token(endpoint: insideEndpoint)
            let keys = try WebPushSubscription(
                json: Array(harness.simulator.state.webPush.subscribe(app: "default", applicationServerKey: nil).utf8)
            )
            try await Self.store(harness, token: inside, endpoint: insideEndpoint, subscription: keys)
            try await Self.queue(harness, [good.token, unsubscribed.token, otherKey.token, gone, inside])
            try await Self.withDaemon(harness, configuration) {
                try await harness.waitUntil("every row has a result") {
                    try await harness.count("time_sent IS NOT NULL OR time_failed IS NOT NULL") == 5
                }
            }
            let results = try await TestDatabase.scalar(
                harness.url,
                """
                SELECT string_agg(concat_ws(' ', CASE device_token WHEN \(good.token) THEN 'good' WHEN \(unsubscribed.token) THEN 'unsubscribed'
                    WHEN \(otherKey.token) THEN 'other-key' WHEN \(gone) THEN 'gone' ELSE 'inside' END,
                    CASE WHEN time_sent IS NOT NULL THEN 'sent' ELSE 'failed' END, last_status), ', ' ORDER BY message_id)
                FROM push_deliveries
                """,
                as: String.self
            )
            #expect(results == "good sent, unsubscribed failed 410, other-key failed 403, gone failed invalid, inside failed invalid")
            let reasons = try await TestDatabase.scalar(
                harness.url,
                "SELECT string_agg(coalesce(last_error, '-'), ' | ' ORDER BY message_id) FROM push_deliveries WHERE time_failed IS NOT NULL",
                as: String.self
            )
            #expect(
                reasons.contains("VAPID refused") && reasons.contains("subscription is gone") && reasons.contains("inside the network"),
                "\(reasons)"
            )
            // Only the 410 is the feedback job's to prune: a refused key is never a reason to delete a browser.
            let reported = try await TestDatabase.scalar(
                harness.url,
                "SELECT coalesce(string_agg(concat_ws(' ', device_token, source), ','), '-') FROM invalid_tokens",
                as: String.self
            )
            #expect(reported == "\(unsubscribed.token) webpush 410")
        }
    }

    @Test func aPushServiceThatAsksToWaitIsTriedAgainLaterAndOneThatRefusesTheSizeFails() async throws {
        var busy = SimulatorConfiguration.WebPushOptions()
        busy.answer = 429
        try await Self.run(busy) { harness, configuration, key in
            let browser = try await Self.subscribe(harness, key)
            try await Self.queue(harness, [browser.token])
            try await Self.withDaemon(harness, configuration) {
                try await harness.waitUntil("the row waits to be tried again") {
                    try await harness.count("last_status = '429' AND status = 'retrying'") == 1
                }
            }
            #expect(try await harness.count("time_sent IS NOT NULL OR time_failed IS NOT NULL") == 0)
        }
        var small = SimulatorConfiguration.WebPushOptions()
        small.answer = 413
        try await Self.run(small) { harness, configuration, key in
            let browser = try await Self.subscribe(harness, key)
            try await Self.queue(harness, [browser.token])
            try await Self.withDaemon(harness, configuration) {
                try await harness.waitUntil("the row failed") { try await harness.count("time_failed IS NOT NULL") == 1 }
            }
            #expect(try await harness.count("last_status = '413' AND last_error LIKE 'unencodable%'") == 1)
        }
    }

    /// An app with a VAPID key of its own (`apps add --vapid-key-file`) signs its browsers' messages with it; the
    /// default app's browsers get the configuration's; an app without one never signs with the default app's key (its
    /// rows wait).
    @Test func eachAppSignsItsBrowsersWithItsOwnKey() async throws {
        try await Self.run { harness, configuration, key in
            let betaKey = VAPIDKey.generate()
            let betaFile = NSTemporaryDirectory() + "pushchat-vapid-beta-\(UUID().uuidString).pem"
            try betaKey.pem.write(toFile: betaFile, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: betaFile) }
            for (name, file) in [("beta", betaFile as String?), ("gamma", nil)] {
                var settings = App.Settings(
                    bundleID: "com.example.\(name)",
                    environment: .sandbox,
                    transport: .http2,
                    credentials: .token(keyFile: TestCertificates.path("AuthKey_BETAKEY001.p8"), keyID: "BETAKEY001", teamID: "DEVTEAM001")
                )
                settings.webPushVAPIDKeyFile = file
                settings.webPushPublicKey = file == nil ? nil : betaKey.publicKey
                let added = try await TestDatabase.withConnection(harness.url) { connection in
                    try await AppAdmin(connection: connection, logger: TestDatabase.logger).add(name: name, settings: settings)
                }
                #expect(added)
            }
            // Each browser subscribed with its app's key (the simulator answers 403 to a message signed by another).
            let own = try await Self.subscribe(harness, key)
            let beta = try await Self.subscribe(harness, betaKey)
            let gamma = try await Self.subscribe(harness, key)
            try await Self.queue(harness, [own.token, beta.token, gamma.token])
            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query(
                    "UPDATE push_queue SET app = CASE device_token WHEN \(beta.token) THEN 'beta' WHEN \(gamma.token) THEN 'gamma' ELSE app END",
                    logger: TestDatabase.logger
                )
            }
            var apnsOverHTTP2 = configuration
            apnsOverHTTP2.apns.host = Endpoint(host: "127.0.0.1", port: harness.ports.http2)
            try await harness.withDaemonStatus(apnsOverHTTP2) { port in
                try await harness.waitUntilAllSent(2)
                // The figures by app and platform: gamma's browser row waits (the queue-late alert sees it), beta's went
                // out on its own push service connection.
                try await harness.waitUntil("the lanes are sampled since") {
                    let scrape = try await LoopbackHTTP.scrape(port: port)
                    return scrape[#"pushchat_app_pending{app="gamma",platform="web"}"#] == 1
                        && scrape[#"pushchat_app_pending{app="beta",platform="web"}"#] == 0
                }
                let scrape = try await LoopbackHTTP.scrape(port: port)
                #expect(scrape.number(#"pushchat_app_oldest_pending_age_seconds{app="gamma",platform="web"}"#) >= 0)
                #expect(scrape[#"pushchat_app_sent{app="beta"}"#] == 1)
                #expect(scrape[#"pushchat_gateway_connected{app="beta",platform="web"}"#] == 1, "beta's browser sender is ready")
                #expect(scrape[#"pushchat_webpush_connections{app="beta"}"#] == 1, "one push service, one connection")
            }
            #expect(Set(harness.simulator.state.accepted.map(\.token)) == [own.id, beta.id])
            #expect(try await harness.count("app = 'gamma' AND time_sent IS NULL AND time_failed IS NULL") == 1, "gamma has no key: waits")
        }
    }

    /// A browser subscribed through `service` (a proxy on its own port: another origin, as another push service is),
    /// stored as the API stores it.
    static func subscribe(_ harness: PushHarness, _ key: VAPIDKey, via service: TCPProxy) async throws -> String {
        let json = harness.simulator.state.webPush.subscribe(app: "default", applicationServerKey: key.publicKey)
        let subscription = try WebPushSubscription(json: Array(json.utf8))
        let endpoint = "https://127.0.0.1:\(service.port)\(subscription.endpoint.path)"
        let token = WebPushSubscription.token(endpoint: endpoint)
        try await store(harness, token: token, endpoint: endpoint, subscription: subscription)
        return token
    }

    /// Browsers on two push services (two origins: proxies on two ports in front of the simulator's push service,
    /// each counting the connections it forwards). A push service's connection closes once idle for
    /// `apns_connection_idle`, and with `webpush_max_connections` 1 the least recently used idle one closes when
    /// another push service is needed; each opens again when a row needs it. The interactive sender never closes its
    /// link, so without this its connections would pile up, one per push service ever named.
    @Test func pushServicesConnectionsCloseWhenIdleAndTheLeastRecentlyUsedMakesRoom() async throws {
        try await Self.run { harness, configuration, key in
            let upstream = try #require(harness.ports.webPush)
            let first = TCPProxy(upstreamPort: upstream)
            let second = TCPProxy(upstreamPort: upstream)
            try await first.start()
            try await second.start()
            var configuration = configuration
            configuration.webPush.privateHosts = ["127.0.0.1:\(first.port)", "127.0.0.1:\(second.port)"]
            let a = try await Self.subscribe(harness, key, via: first)
            let b = try await Self.subscribe(harness, key, via: second)
            @Sendable func send(_ token: String) async throws {
                try await Self.queue(harness, [token])
                try await harness.waitUntil("the row is sent") { try await harness.count("time_sent IS NULL") == 0 }
            }

            // Idle: each closes after a second without work, and opens again when a row needs it.
            var idle = configuration
            idle.push.connectionIdle = .seconds(1)
            try await harness.withDaemonStatus(idle) { port in
                try await send(a)
                try await send(b)
                #expect(first.connections.forwarded == 1 && second.connections.forwarded == 1)
                try await harness.waitUntil(timeout: .seconds(10), "both push services' connections closed idle") {
                    first.connections.open == 0 && second.connections.open == 0
                }
                #expect(try await LoopbackHTTP.scrape(port: port)[#"pushchat_webpush_connections{app="default"}"#] == 0)
                try await send(a)
                #expect(first.connections.forwarded == 2, "a new connection for the next row")
                #expect(first.connections.open == 1)
            }

            // The limit: one idle connection at most; the least recently used makes room, the busy one is kept.
            var limited = configuration
            limited.push.connectionIdle = .seconds(300)
            limited.webPush.maxConnections = 1
            let before = (first.connections.forwarded, second.connections.forwarded)
            try await harness.withDaemonStatus(limited) { port in
                try await send(a)
                #expect(first.connections.open == 1)
                try await send(b)
                try await harness.waitUntil(timeout: .seconds(10), "the first push service's idle connection made room") {
                    first.connections.open == 0 && second.connections.open == 1
                }
                try await send(a)
                try await harness.waitUntil(timeout: .seconds(10), "then the second's") {
                    first.connections.open == 1 && second.connections.open == 0
                }
                #expect(first.connections.forwarded - before.0 == 2 && second.connections.forwarded - before.1 == 1)
                #expect(try await LoopbackHTTP.scrape(port: port)[#"pushchat_webpush_connections{app="default"}"#] == 1)
            }
            let delivered = harness.simulator.state.accepted.filter { $0.format == "web" }
            #expect(delivered.count == 6, "each row once, through whichever push service its browser named")
            await first.stop()
            await second.stop()
        }
    }
}
