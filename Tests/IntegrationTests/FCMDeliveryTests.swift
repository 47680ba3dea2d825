import FCM
import Foundation
import PostgresNIO
import Testing
import _CryptoExtras

@testable import Observability
@testable import Push
@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support

/// The FCM sender against the simulator's Google side: a real token endpoint verifying the RS256 assertion, real
/// HTTP/2 and TLS on loopback, rows from PostgreSQL; each of Google's answers handled as documented, checked in the
/// database and at the simulator.
@Suite(.serialized) struct FCMDeliveryTests {
    static let project = "pushchat-test"

    /// An FCM registration token of the shape FCM gives (n makes it unique).
    static func token(_ n: Int) -> String { "fcmTok\(n):APA91b" + String(repeating: "x", count: 120) + "_\(n)" }

    /// A simulator with the Google side on a port known in advance (the service account's token URI names it), a
    /// service-account file for it, and the harness; `options` holds the simulator's FCM faults.
    static func run(
        _ options: SimulatorConfiguration.FCMOptions = .init(),
        maxStreams: Int? = nil,
        _ body: @Sendable (PushHarness, _ configuration: Configuration) async throws -> Void
    ) async throws {
        let port = try FreePort.loopback()
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let file = NSTemporaryDirectory() + "pushchat-fcm-\(UUID().uuidString).json"
        let json = """
            {"type": "service_account", "project_id": "\(project)", "private_key_id": "k1",
             "private_key": \(JSONText.quoted(key.pemRepresentation)),
             "client_email": "pushchat@\(project).iam.gserviceaccount.com",
             "token_uri": "https://127.0.0.1:\(port)/token"}
            """
        try json.write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        var simulator = SimulatorTests.configuration()
        simulator.fcmPort = port
        simulator.fcm = options
        if let maxStreams { simulator.http2.maxConcurrentStreams = maxStreams }
        simulator.fcm.accounts = [SimulatorConfiguration.FCMAccount(try ServiceAccount(file: file))]
        try await PushHarness.run(simulator: simulator) { harness in
            var configuration = harness.configuration()
            configuration.fcm.serviceAccountFile = file
            configuration.fcm.host = Endpoint(host: "127.0.0.1", port: port)
            configuration.fcm.caFile = TestCertificates.path("ca.pem")
            configuration.push.requestTimeout = .seconds(2)
            try await body(harness, configuration)
        }
    }

    /// Runs the daemon (APNs over the binary interface, FCM for the default app) while `body` runs.
    static func withDaemon(
        _ harness: PushHarness,
        _ configuration: Configuration,
        metrics: MetricsRegistry = MetricsRegistry(),
        _ body: @Sendable () async throws -> Void
    ) async throws {
        let services = try PushService.services(
            configuration: configuration,
            logger: TestDatabase.logger,
            instance: "test-fcm-daemon",
            metrics: metrics
        )
        try await harness.withServices(services, body)
    }

    /// Queues FCM rows to tokens `numbers` with an FCM message payload, and APNs rows beside them.
    static func queue(_ harness: PushHarness, fcm numbers: [Int], apns: Int = 0) async throws {
        try await TestDatabase.withConnection(harness.url) { connection in
            try await connection.query(
                """
                INSERT INTO push_queue (platform, device_token, payload)
                SELECT 'fcm', t, '{"notification":{"title":"PushChat","body":"Ann: hi"},"android":{"priority":"high"}}'
                FROM unnest(\(numbers.map(Self.token))::text[]) t
                """,
                logger: TestDatabase.logger
            )
        }
        if apns > 0 { try await harness.queue(apns, from: 1) }
    }

    @Test func androidAndIPhoneRowsGoOutFromOneQueueEachOnItsPlatformOnce() async throws {
        try await Self.run { harness, configuration in
            try await Self.queue(harness, fcm: Array(1...50), apns: 20)
            try await Self.withDaemon(harness, configuration) {
                try await harness.waitUntilAllSent(70)
            }
            let accepted = harness.simulator.state.accepted
            let fcm = accepted.filter { $0.format == "fcm" }
            #expect(fcm.count == 50 && Set(fcm.map(\.token)) == Set((1...50).map(Self.token)), "each Android row once, at FCM")
            #expect(accepted.count - fcm.count == 20, "each iPhone row once, at APNs")
            let first = try #require(fcm.first)
            let message = try JSON.parse(first.payload)["message"]
            #expect(message?["notification"]?["body"]?.stringValue == "Ann: hi" && message?["token"]?.stringValue == first.token)
            #expect(first.topic == Self.project)
            #expect(harness.simulator.fcmAuth.tokensIssued == 1, "one access token for every message")
            #expect(try await harness.count("platform = 'fcm' AND time_sent IS NOT NULL") == 50)
        }
    }

    /// A chat room of iPhones and an Android phone gets one message everywhere, each on its platform; a provider
    /// notification reaches a user's Android device, and one that has nothing for Android is refused with nothing
    /// written when its recipients include one.
    @Test func aRoomWithIPhonesAndAnAndroidPhoneGetsOneMessageEverywhere() async throws {
        try await Self.run { harness, configuration in
            let database = DatabaseClient(url: harness.url, applicationName: "pushchat-tests", keepOpen: false, logger: TestDatabase.logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await database.run() }
                try await database.waitForPool()
                let chat = ChatStore(database: database, logger: TestDatabase.logger)
                let udid = { (n: Int) in String(format: "%040x", n) }
                #expect(try await chat.join(udid: udid(1), token: PushHarness.token(1), name: "Ann", code: "mixed", ipAddress: nil))
                #expect(try await chat.join(udid: udid(2), token: PushHarness.token(2), name: "Bob", code: "mixed", ipAddress: nil))
                #expect(
                    try await chat.join(udid: udid(3), token: Self.token(3), name: "Dee", code: "mixed", platform: .fcm, ipAddress: nil)
                )
                #expect(try await chat.message(udid: udid(1), text: #"hi "all""#).queued == 2)
                let store = ProviderStore(database: database, logger: TestDatabase.logger)
                let key = ProviderStore.Key(name: "backend", requestsPerMinute: 0, recipientsPerMinute: 0)
                let device = try await store.register(token: Self.token(4), user: "u", clientInfo: nil, platform: .fcm, key: key)
                #expect(device?.0.platform == .fcm)
                // The user's iPhone too: one notification, both platforms.
                _ = try await store.register(token: PushHarness.token(5), user: "u", clientInfo: nil, key: key)
                var notification = ProviderStore.Notification(
                    id: UUID(),
                    keyName: "backend",
                    app: App.defaultName,
                    target: .users(["u"]),
                    payload: #"{"aps":{"badge":1}}"#,
                    pushType: "alert",
                    priority: nil,
                    expiration: nil,
                    collapseID: nil,
                    topic: nil,
                    badge: nil,
                    onlyIfBadgeChanged: false,
                    idempotencyKey: nil,
                    requestHash: "h"
                )
                #expect(try await store.queue(notification, maxRecipients: nil) == .notForAndroid(1))
                #expect(try await harness.count("true") == 2, "nothing written for the refused notification")
                notification.fcmPayload = #"{"notification":{"body":"sale"}}"#
                #expect(try await store.queue(notification, maxRecipients: nil) == .queued(recipients: 2))
                try await Self.withDaemon(harness, configuration) {
                    try await harness.waitUntilAllSent(4)
                }
                let status = try await store.status(id: notification.id, keyName: "backend")
                #expect(status?.recipients == 2 && status?.sent == 2 && status?.pending == 0, "the status counts both platforms")
                group.cancelAll()
            }
            let accepted = harness.simulator.state.accepted
            let iphone = try #require(accepted.first { $0.token == PushHarness.token(2) })
            #expect(iphone.payload == #"{"aps":{"alert":"Ann: hi \"all\"","sound":"default"}}"#)
            let android = try #require(accepted.first { $0.token == Self.token(3) })
            #expect(android.format == "fcm")
            #expect(
                android.payload
                    == #"{"message":{"token":"\#(Self.token(3))","notification":{"body":"Ann: hi \"all\""},"android":{"priority":"high","notification":{"sound":"default"}}}}"#
            )
            #expect(accepted.first { $0.token == Self.token(4) }?.payload.contains(#""body":"sale""#) == true)
            #expect(accepted.first { $0.token == PushHarness.token(5) }?.payload == #"{"aps":{"badge":1}}"#)
            #expect(accepted.count == 4, "the sender's own iPhone gets nothing; everyone else once")
        }
    }

    /// UNREGISTERED: failed and recorded for the feedback job; SENDER_ID_MISMATCH and INVALID_ARGUMENT: failed, no
    /// report; 429 and 503: retried after Retry-After, then sent.
    @Test func eachFCMErrorGetsItsHandling() async throws {
        var options = SimulatorConfiguration.FCMOptions()
        options.unregisteredTokens = [Self.token(1)]
        options.senderMismatchTokens = [Self.token(2)]
        options.quotaExceededRequests = 3
        options.unavailableRequests = 2
        try await Self.run(options) { harness, configuration in
            try await Self.queue(harness, fcm: Array(1...10))
            try await TestDatabase.withConnection(harness.url) { connection in
                for (n, name) in [(1, "Gone"), (2, "Mismatch")] {
                    try await connection.query(
                        """
                        INSERT INTO active_users (udid, device_token, platform, nickname, secret_code, token_updated_at)
                        VALUES (\(String(format: "%040x", n)), \(Self.token(n)), 'fcm', \(name), 'room', now() - interval '1 hour')
                        """,
                        logger: TestDatabase.logger
                    )
                }
            }
            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query(
                    "INSERT INTO push_queue (platform, device_token, payload) VALUES ('fcm', \(Self.token(11)), '{\"data\":{\"n\":1}}')",
                    logger: TestDatabase.logger
                )
            }
            try await Self.withDaemon(harness, configuration) {
                try await harness.waitUntil("every FCM row is settled") {
                    try await harness.count("time_sent IS NULL AND time_failed IS NULL") == 0
                }
            }
            let status = { (n: Int) in
                try await TestDatabase.scalar(
                    harness.url,
                    "SELECT coalesce(last_status, '') || '|' || coalesce(last_error, '') || '|' || (time_failed IS NOT NULL)::text FROM push_deliveries WHERE device_token = \(Self.token(n))",
                    as: String.self
                )
            }
            #expect(try await status(1) == "404|UNREGISTERED|true")
            #expect(try await status(2) == "403|SENDER_ID_MISMATCH|true")
            #expect(try await status(11) == "400|INVALID_ARGUMENT: data values must be strings|true", "a data value that is not a string")
            #expect(try await harness.count("time_sent IS NOT NULL") == 8, "the rows FCM throttled or was unavailable for went out later")
            let reports = try await TestDatabase.scalar(
                harness.url,
                "SELECT string_agg(device_token || '|' || source, ',') FROM invalid_tokens",
                as: String.self
            )
            #expect(reports == "\(Self.token(1))|fcm 404 UNREGISTERED", "only UNREGISTERED is reported, case kept")
            #expect(harness.simulator.state.counters.rejectedByStatus["fcm 429", default: 0] == 3)
            // The feedback job prunes the Android chat user UNREGISTERED names (registered before the report), by
            // the same rules as Apple's 410; the one FCM called a sender mismatch stays.
            try await TestDatabase.withFeedbackStore(harness.url) { store in
                let applied = try await store.applyInvalidTokens(try await store.pendingReports())
                #expect(applied.daemon.deleted == 1)
            }
            let left = try await TestDatabase.scalar(
                harness.url,
                "SELECT string_agg(nickname, ',' ORDER BY nickname) FROM active_users",
                as: String.self
            )
            #expect(left == "Mismatch")
        }
    }

    /// An access token FCM no longer takes (401) is fetched again once, however many requests carried it.
    @Test func aRefusedAccessTokenIsRefreshedOnceNotPerRequest() async throws {
        try await Self.run { harness, configuration in
            try await Self.queue(harness, fcm: Array(1...5))
            try await Self.withDaemon(harness, configuration) {
                try await harness.waitUntilAllSent(5)
                #expect(harness.simulator.fcmAuth.tokensIssued == 1)
                harness.simulator.fcmAuth.revokeTokens()
                try await Self.queue(harness, fcm: Array(6...105))
                try await harness.waitUntilAllSent(105)
            }
            #expect(harness.simulator.fcmAuth.tokensIssued == 2, "one refresh for the hundred requests the 401s met")
            #expect(Set(harness.simulator.state.accepted.filter { $0.format == "fcm" }.map(\.token)).count == 105)
        }
    }

    /// Adds app `name` (HTTP/2 with a token, `serviceAccountFile` its own FCM account or none), queues Android rows to
    /// tokens 1 and 2 and gives the row to token `android` to the app (the other stays the default app's).
    static func addApp(_ harness: PushHarness, _ name: String, serviceAccountFile: String?, android: Int) async throws {
        var settings = App.Settings(
            bundleID: "com.example.\(name)",
            environment: .sandbox,
            transport: .http2,
            credentials: .token(keyFile: TestCertificates.path("AuthKey_BETAKEY001.p8"), keyID: "BETAKEY001", teamID: "DEVTEAM001")
        )
        settings.fcmServiceAccountFile = serviceAccountFile
        let added = try await TestDatabase.withConnection(harness.url) { connection in
            try await AppAdmin(connection: connection, logger: TestDatabase.logger).add(name: name, settings: settings)
        }
        #expect(added)
        try await Self.queue(harness, fcm: [1, 2])
        try await TestDatabase.withConnection(harness.url) { connection in
            try await connection.query(
                "UPDATE push_queue SET app = \(name) WHERE device_token = \(Self.token(android))",
                logger: TestDatabase.logger
            )
        }
    }

    /// An app with a service account of its own sends its Android rows with it (`apps add --fcm-service-account`),
    /// found at the daemon's read of the apps; the default app, with none configured, keeps its Android rows queued.
    @Test func anAppsOwnServiceAccountSendsItsAndroidRows() async throws {
        try await Self.run { harness, configuration in
            let file = try #require(configuration.fcm.serviceAccountFile)
            try await Self.addApp(harness, "beta", serviceAccountFile: file, android: 2)
            var withoutDefault = configuration
            withoutDefault.fcm.serviceAccountFile = nil
            withoutDefault.apns.host = Endpoint(host: "127.0.0.1", port: harness.ports.http2)
            try await Self.withDaemon(harness, withoutDefault) {
                try await harness.waitUntil("beta's Android row is sent") {
                    try await harness.count("app = 'beta' AND time_sent IS NOT NULL") == 1
                }
                try await Task.sleep(for: .milliseconds(500))
            }
            #expect(
                try await harness.count("app = 'default' AND time_sent IS NULL AND time_failed IS NULL") == 1,
                "no default account: waits"
            )
            #expect(harness.simulator.state.accepted.map(\.token) == [Self.token(2)])
        }
    }

    /// An app without a service account of its own never sends its Android rows with the default app's: they wait,
    /// while the default app's are sent (each app's senders come from its own configuration).
    @Test func anAppWithoutAServiceAccountNeverUsesTheDefaultOne() async throws {
        try await Self.run { harness, configuration in
            try await Self.addApp(harness, "gamma", serviceAccountFile: nil, android: 2)
            var apnsOverHTTP2 = configuration
            apnsOverHTTP2.apns.host = Endpoint(host: "127.0.0.1", port: harness.ports.http2)
            try await Self.withDaemon(harness, apnsOverHTTP2) {
                try await harness.waitUntil("the default app's Android row is sent") {
                    try await harness.count("app = 'default' AND time_sent IS NOT NULL") == 1
                }
                // Past the daemon's first read of the apps (at start) and a connection's worth of time.
                try await Task.sleep(for: .seconds(1))
            }
            #expect(
                try await harness.count("app = 'gamma' AND time_sent IS NULL AND time_failed IS NULL") == 1,
                "gamma has no service account: its row waits"
            )
            #expect(harness.simulator.state.accepted.map(\.token) == [Self.token(1)])
        }
    }

    /// kill -9 of the daemon while it drains Android rows loses nothing: rows it held come back when their lease runs
    /// out and the next daemon sends them (some may arrive twice, as over APNs: at least once, never lost); only rows a
    /// dead daemon held arrive twice.
    @Test func killMinus9DuringAnFCMDrainLosesNothing() async throws {
        var options = SimulatorConfiguration.FCMOptions()
        options.answerDelay = .milliseconds(20)
        // At most 10 in flight, each answered after 20 ms: about 500 a second, so each kill lands mid-drain.
        try await Self.run(options, maxStreams: 10) { harness, configuration in
            try await Self.queue(harness, fcm: Array(1...2000))
            var environment = harness.environment(configuration)
            environment["PUSHCHAT_FCM_SERVICE_ACCOUNT_FILE"] = configuration.fcm.serviceAccountFile
            environment["PUSHCHAT_FCM_HOST"] = configuration.fcm.host.description
            environment["PUSHCHAT_FCM_CA_FILE"] = configuration.fcm.caFile
            environment["PUSHCHAT_PUSH_REQUEST_TIMEOUT"] = "2"
            let fcm: @Sendable () -> [AcceptedNotification] = { harness.simulator.state.accepted.filter { $0.format == "fcm" } }
            var held = Set<String>()
            for round in 1...2 {
                let (process, _) = try PushProcessTests.start(environment)
                try await harness.waitUntil(timeout: .seconds(20), "round \(round) delivers something") { fcm().count >= round * 200 }
                kill(process.processIdentifier, SIGKILL)
                _ = try await PushProcessTests.waitForExit(process, timeout: .seconds(5))
                #expect(process.terminationReason == .uncaughtSignal)
                held.formUnion(try await PushProcessTests.heldTokens(by: process, in: harness.url))
            }
            #expect(!held.isEmpty, "they died holding rows")
            #expect(try await harness.count("time_sent IS NULL") > 0, "the kills came before the drain was done")
            let (process, _) = try PushProcessTests.start(environment)
            try await harness.waitUntilAllSent(2000, timeout: .seconds(60))
            process.terminate()
            #expect(try await PushProcessTests.waitForExit(process, timeout: .seconds(15)))
            #expect(Set(fcm().map(\.token)) == Set((1...2000).map(Self.token)), "every Android row reached FCM")
            let twice = PushProcessTests.twice(fcm())
            #expect(twice.isSubset(of: held), "only what the dead daemons held may arrive twice (\(twice.subtracting(held).count) others)")
            #expect(try await harness.count("claimed_until IS NOT NULL AND time_sent IS NULL") == 0, "none stays claimed")
        }
    }

    /// As over APNs, the default app's Android chat has a connection of its own: open before the first message and
    /// kept while idle (`apns_connection_idle` closes only the others), while a broadcast's Android rows drain on
    /// another (`connection="bulk-1"`), opened while they wait. A chat message queued mid-broadcast goes out while most
    /// of the broadcast waits; one access token serves both connections; each row reaches FCM once.
    @Test func androidChatHasAConnectionOfItsOwnBesideABroadcast() async throws {
        var options = SimulatorConfiguration.FCMOptions()
        options.answerDelay = .milliseconds(100)
        // At most 20 in flight, each answered after 100 ms: about 200 broadcast rows a second.
        try await Self.run(options, maxStreams: 20) { harness, configuration in
            var configuration = configuration
            configuration.push.connectionIdle = .seconds(1)
            let metrics = MetricsRegistry()
            let scrape: @Sendable () -> Scrape = { Scrape(String(decoding: metrics.exposition(), as: UTF8.self)) }
            let connected = #"pushchat_gateway_connected{app="default",platform="fcm"}"#
            let devices = 2_000
            try await Self.withDaemon(harness, configuration, metrics: metrics) {
                try await harness.waitUntil(timeout: .seconds(10), "the Android chat connection is open with nothing to send") {
                    scrape()[connected] == 1
                }
                try await Task.sleep(for: .seconds(2))
                #expect(scrape()[connected] == 1, "kept open past apns_connection_idle")
                try await TestDatabase.withConnection(harness.url) { connection in
                    try await connection.query(
                        """
                        INSERT INTO push_queue (platform, device_token, payload, bulk)
                        SELECT 'fcm', t, '{"notification":{"title":"PushChat","body":"news"}}', true
                        FROM unnest(\((1...devices).map(Self.token))::text[]) t
                        """,
                        logger: TestDatabase.logger
                    )
                }
                try await harness.waitUntil(timeout: .seconds(20), "the broadcast is under way") {
                    try await harness.count("bulk AND time_sent IS NOT NULL") >= 100
                }
                let bulkInFlight = #"pushchat_push_in_flight{app="default",platform="fcm",connection="bulk-1"}"#
                #expect(scrape()[bulkInFlight] != nil, "the broadcast has a connection of its own")
                #expect(scrape()[connected] == 2, "chat's and the broadcast's")
                try await Self.queue(harness, fcm: [9_999_999])
                try await harness.waitUntil(timeout: .seconds(10), "the chat message is sent") {
                    try await harness.count("NOT bulk AND time_sent IS NOT NULL") == 1
                }
                let behind = try await harness.count("bulk AND time_sent IS NULL")
                #expect(behind > 1_000, "the chat message did not wait for the broadcast (\(behind) of its rows still to go)")
                try await harness.waitUntilAllSent(devices + 1, timeout: .seconds(60))
            }
            let fcm = harness.simulator.state.accepted.filter { $0.format == "fcm" }
            #expect(fcm.count == devices + 1 && Set(fcm.map(\.token)).count == devices + 1, "each row reached FCM once")
            #expect(harness.simulator.fcmAuth.tokensIssued == 1, "one access token for both connections")
        }
    }

    /// A token near its expiry is renewed once, in the background, while the requests keep using it: tokens that live
    /// 302 s are due for renewal 2 s after issue (5 minutes ahead), so a second batch 3 s later renews it once.
    @Test func aTokenNearItsExpiryIsRenewedOnceNotPerRequest() async throws {
        var options = SimulatorConfiguration.FCMOptions()
        options.accessTokenLifetime = 302
        try await Self.run(options) { harness, configuration in
            try await Self.queue(harness, fcm: Array(1...20))
            try await Self.withDaemon(harness, configuration) {
                try await harness.waitUntilAllSent(20)
                #expect(harness.simulator.fcmAuth.tokensIssued == 1)
                try await Task.sleep(for: .seconds(3))
                try await Self.queue(harness, fcm: Array(21...520))
                try await harness.waitUntilAllSent(520)
            }
            #expect(harness.simulator.fcmAuth.tokensIssued == 2, "one renewal for the 500 requests of the second batch")
            #expect(try await harness.count("last_status IS NOT NULL") == 0, "no request was refused on the way")
        }
    }

    /// A token URI that refuses the account keeps the Android rows queued and is asked again only after a growing
    /// pause, whether it refuses from the start (another key than the one Google knows) or once the token in use was
    /// revoked mid-drain (a 401, then `invalid_grant`): the connection stops instead of claiming and releasing rows in a
    /// loop, and nothing is asked per row.
    @Test func aRefusedServiceAccountKeepsTheRowsQueuedAndBacksOff() async throws {
        try await Self.run { harness, configuration in
            // The same account with another key: the simulator's token endpoint refuses its assertions.
            let file = try #require(configuration.fcm.serviceAccountFile)
            let other = NSTemporaryDirectory() + "pushchat-other-key-\(UUID().uuidString).json"
            let json = try JSON.parse(try String(contentsOfFile: file, encoding: .utf8))
            let key = try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation
            let members = try #require(json.members).map { $0.key == "private_key" ? JSON.Member("private_key", .string(key)) : $0 }
            try JSON.object(members).serialized.write(toFile: other, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: other) }
            var refused = configuration
            refused.fcm.serviceAccountFile = other
            try await Self.queue(harness, fcm: Array(1...50))
            let metrics = MetricsRegistry()
            try await Self.withDaemon(harness, refused, metrics: metrics) {
                try await Task.sleep(for: .seconds(4))
            }
            let fromTheStart = harness.simulator.fcmAuth.tokenRequests
            // Each refused fetch counted for the app (the FCM-token alert's figure).
            let scrape = Scrape(String(decoding: metrics.exposition(), as: UTF8.self))
            #expect(scrape[#"pushchat_fcm_token_failures_total{app="default"}"#] == Double(fromTheStart), "\(fromTheStart) refused")
            #expect(fromTheStart >= 2 && fromTheStart <= 5, "asked again after 1, 2, 4 s, not per row: \(fromTheStart)")
            #expect(try await harness.count("time_sent IS NULL AND time_failed IS NULL") == 50, "every Android row still queued")
            // Mid-drain: a good token first, then revoked, and every new assertion refused.
            try await Self.withDaemon(harness, configuration) {
                try await harness.waitUntilAllSent(50)
                harness.simulator.fcmAuth.setRefusingGrants(true)
                harness.simulator.fcmAuth.revokeTokens()
                let before = harness.simulator.fcmAuth.tokenRequests
                try await Self.queue(harness, fcm: Array(51...250))
                try await Task.sleep(for: .seconds(4))
                let asked = harness.simulator.fcmAuth.tokenRequests - before
                #expect(asked >= 1 && asked <= 6, "after the 401: a few attempts with pauses, not one per row or batch: \(asked)")
            }
            #expect(try await harness.count("time_sent IS NULL AND time_failed IS NULL") == 200, "the rows after the revocation wait")
            #expect(harness.simulator.state.accepted.count == 50)
        }
    }

    /// `pushchat-push` with a service-account file it cannot use stops at start: exit 78 and one line naming the
    /// setting, the file and the field (never the key).
    @Test func theDaemonRefusesABadServiceAccountFileAtStart() throws {
        let file = NSTemporaryDirectory() + "pushchat-bad-fcm-\(UUID().uuidString).json"
        try
            #"{"type": "service_account", "project_id": "pushchat-test", "client_email": "a@b.c", "token_uri": "https://127.0.0.1/token", "private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let daemon = Executable(name: "pushchat-push")
        for (path, reason) in [("/nonexistent/fcm.json", "cannot read the file"), (file, "\"private_key\" is not an RSA private key")] {
            let result = try daemon.run(
                ["development"],
                environment: [
                    "PUSHCHAT_DATABASE_URL": "postgres://u@127.0.0.1:1/db", "PUSHCHAT_APNS_CERTIFICATE": TestCertificates.path("ck.pem"),
                    "PUSHCHAT_APNS_PASSPHRASE": TestCertificates.passphrase, "PUSHCHAT_FCM_SERVICE_ACCOUNT_FILE": path,
                    "PUSHCHAT_LOG_FILE": "-",
                ]
            )
            #expect(result.status == 78, "\(result.standardError)")
            let lines = result.standardError.split(separator: "\n").filter { $0.contains("fcm_service_account_file") }
            #expect(
                lines.count == 1 && lines.first?.contains(path) == true && lines.first?.contains(reason) == true,
                "\(result.standardError)"
            )
            #expect(!result.standardError.contains("AAAA"), "the key is never printed")
        }
    }

    /// A service-account file the daemon cannot use stops it at start with one line naming the setting (exit 78).
    @Test func aBadServiceAccountFileIsRefusedAtStart() async throws {
        var configuration = Configuration(mode: .development, databaseURL: try DatabaseURL(parsing: "postgres://u@127.0.0.1/db"))
        configuration.fcm.serviceAccountFile = "/nonexistent/fcm.json"
        #expect {
            _ = try FCMTransport.load(configuration)
        } throws: { error in
            let error = error as? ServiceAccountError
            return error?.exitStatus == 78 && error?.description == "fcm_service_account_file: /nonexistent/fcm.json: cannot read the file"
        }
    }
}
