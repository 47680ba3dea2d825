import Foundation
import PostgresNIO
import Testing

@testable import API
@testable import APNs
@testable import Feedback
@testable import Observability
@testable import Push
@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support

/// Provider tokens: made once, reused, refreshed once on expiry; checked like APNs does.
@Suite struct ProviderTokenTests {
    static func signer(_ file: String = "AuthKey_DEVKEY0001.p8") throws -> ProviderTokenSigner {
        try ProviderTokenSigner(keyFile: TestCertificates.path(file), keyID: PushHarness.keyID, teamID: PushHarness.teamID)
    }

    static func verifier() throws -> ProviderTokenVerifier {
        try ProviderTokenVerifier(
            keyID: PushHarness.keyID,
            teamID: PushHarness.teamID,
            publicKeyPEM: String(contentsOfFile: TestCertificates.path("AuthKey_DEVKEY0001.pub.pem"), encoding: .utf8)
        )
    }

    @Test func aTokenIsReusedAndRefreshedBetweenTwentyAndSixtyMinutes() throws {
        let cache = ProviderTokenCache(signer: try Self.signer(), refreshAfter: 50 * 60)
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let first = try cache.current(now: start)
        #expect(try cache.current(now: start + 49 * 60) == first, "reused, never per request")
        let second = try cache.current(now: start + 50 * 60)
        #expect(second.generation == first.generation + 1)
        #expect(second.token != first.token)
        #expect(ProviderTokenCache(signer: try Self.signer(), refreshAfter: 60).refreshAfter == 20 * 60, "clamped to Apple's range")
        #expect(ProviderTokenCache(signer: try Self.signer(), refreshAfter: 7200).refreshAfter == 60 * 60)
    }

    @Test func expiryRefreshesOnceThenStops() throws {
        let cache = ProviderTokenCache(signer: try Self.signer())
        let now = Date()
        let first = try cache.current(now: now)
        #expect(try cache.expired(generation: first.generation, now: now) == true)
        let second = try cache.current(now: now)
        #expect(second.generation == first.generation + 1)
        #expect(try cache.expired(generation: second.generation, now: now) == false, "a fresh token refused again: no refresh loop")
        cache.accepted(generation: second.generation)
        #expect(try cache.expired(generation: second.generation, now: now) == true, "after a success, a later expiry refreshes again")
    }

    @Test func theVerifierAcceptsGoodTokensAndNamesTheProblemOtherwise() throws {
        let verifier = try Self.verifier()
        let now = Date()
        #expect(verifier.check(try Self.signer().token(issuedAt: now), now: now) == nil)
        #expect(verifier.check(try Self.signer().token(issuedAt: now - 3700), now: now) == "ExpiredProviderToken")
        #expect(verifier.check(try Self.signer("AuthKey_OTHERKEY01.p8").token(issuedAt: now), now: now) == "InvalidProviderToken")
        #expect(verifier.check("not.a.token", now: now) == "InvalidProviderToken")
        let other = ProviderTokenSigner(keyID: "OTHERKEY01", teamID: PushHarness.teamID, key: try Self.signer().key)
        #expect(verifier.check(try other.token(issuedAt: now), now: now) == "InvalidProviderToken", "wrong kid")
    }

    @Test func apnsIDsAreStablePerRow() {
        // "PushCh", version 8 and variant 10 bits, then the row's id big-endian: the apns-id names the row.
        #expect(HTTP2Notification.apnsID(messageID: 42).uuidString == "50757368-4368-8000-8000-00000000002A")
        #expect(HTTP2Notification.apnsID(messageID: 0x0123_4567_89AB).uuidString == "50757368-4368-8000-8000-0123456789AB")
        #expect(HTTP2Notification.apnsID(messageID: 43) != HTTP2Notification.apnsID(messageID: 42))
        for id: Int64 in [0, 42, 0xFFFF, 0x0123_4567_89AB, 0x3FFF_FFFF_FFFF_FFFF, Int64.max] {
            #expect(HTTP2Notification.apnsIDText(messageID: id) == HTTP2Notification.apnsID(messageID: id).uuidString.lowercased())
        }
        #expect(HTTP2Notification.path(token: "AbCd09") == "/3/device/abcd09")
    }
}

/// The HTTP/2 path end to end: queue → daemon → simulator, with Apple's answers and faults.
@Suite(.serialized) struct HTTP2DaemonTests {
    @Test func deliversEveryRowOnceWithTokenAuthentication() async throws {
        try await PushHarness.run { harness in
            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query(
                    """
                    INSERT INTO push_queue (device_token, payload, priority, collapse_id, push_type)
                    VALUES (\(PushHarness.token(999)), '{"aps":{"content-available":1}}', 5, 'chat-1', 'background')
                    """,
                    logger: TestDatabase.logger
                )
            }
            try await harness.queue(300)
            try await harness.withHTTP2Daemon(try harness.http2()) {
                try await harness.waitUntilAllSent(301)
            }
            let accepted = harness.simulator.state.accepted
            #expect(accepted.count == 301)
            #expect(Set(accepted.map(\.token)).count == 301, "nothing sent twice")
            #expect(accepted.allSatisfy { $0.format == "http2" })
            let background = try #require(accepted.first { $0.token == PushHarness.token(999) })
            #expect(background.priority == 5)
            #expect(try await harness.count("time_sent IS NULL AND claimed_until IS NOT NULL") == 0, "no row left leased")
        }
    }

    @Test func deliversWithTheClientCertificate() async throws {
        try await PushHarness.run { harness in
            try await harness.queue(20)
            try await harness.withHTTP2Daemon(try harness.http2(certificate: true)) {
                try await harness.waitUntilAllSent(20)
            }
            #expect(harness.simulator.state.accepted.count == 20)
        }
    }

    /// Sandbox tokens sent to production: APNs answers every request 400 BadDeviceToken. The notifications fail with
    /// that reason, no user is deleted (not by the daemon, not by the feedback job), and the daemon says what is wrong:
    /// a critical line, 503 on /readyz, and `pushchat_push_wrong_environment` 1.
    @Test func aWrongEnvironmentFailsNotificationsButDeletesNobodyAndRaisesTheAlarm() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.http2.otherEnvironment = true
        try await PushHarness.run(simulator: simulator) { harness in
            try await FeedbackTests.addUsers(harness, Array(1...30), registeredAgo: 7200)
            try await harness.queue(30)
            let (configuration, _) = try harness.http2()
            try await harness.withDaemonStatus(configuration) { port in
                try await harness.waitUntil("30 failed") { try await harness.sentAndFailed() == [0, 30] }
                try await harness.waitUntil("the alarm is up") {
                    try await LoopbackHTTP.get(port: port, path: "/readyz").status == 503
                }
                let readiness = try await LoopbackHTTP.get(port: port, path: "/readyz")
                #expect(readiness.body.contains("wrong topic or environment"))
                let metrics = try await LoopbackHTTP.scrape(port: port)
                #expect(metrics["pushchat_push_wrong_environment"] == 1)
                #expect(metrics[#"pushchat_push_failed{reason="BadDeviceToken"}"#] == 30)
            }
            let reasons = try await TestDatabase.scalar(
                harness.url,
                "SELECT string_agg(DISTINCT last_status || ' ' || last_error, ',') FROM push_deliveries WHERE time_failed IS NOT NULL",
                as: String.self
            )
            #expect(reasons == "400 BadDeviceToken")
            #expect(try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM invalid_tokens", as: Int64.self) == 0)
            var withoutCertificate = configuration
            withoutCertificate.apns.certificate = nil
            let report = try await FeedbackTests.job(harness, configuration: withoutCertificate).run()
            #expect(report.usersDeleted == 0)
            #expect(try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM active_users", as: Int64.self) == 30)
        }
    }

    @Test func unregisteredIsFailedRecordedWithApplesTimeAndPrunedByTheFeedbackJob() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.unregisteredTokens = [PushHarness.token(2)]
        try await PushHarness.run(simulator: simulator) { harness in
            try await FeedbackTests.addUsers(harness, [1, 2], registeredAgo: 7200)
            try await harness.queue(3)
            let (configuration, authentication) = try harness.http2()
            try await harness.withHTTP2Daemon((configuration, authentication)) {
                try await harness.waitUntil("2 sent, 1 failed") { try await harness.sentAndFailed() == [2, 1] }
            }
            let row = try await TestDatabase.scalar(
                harness.url,
                "SELECT last_status || ' ' || last_error FROM push_deliveries WHERE time_failed IS NOT NULL",
                as: String.self
            )
            #expect(row == "410 Unregistered")
            let age = try await TestDatabase.scalar(
                harness.url,
                "SELECT extract(epoch FROM now() - reported_at)::float8 FROM invalid_tokens",
                as: Double.self
            )
            #expect(age >= 55 && age < 120, "Apple's timestamp (a minute ago in the simulator), not the time of the answer")
            // With HTTP/2 the job has no feedback service to read (Apple has none); it handles the daemon's reports.
            var withoutCertificate = configuration
            withoutCertificate.apns.certificate = nil
            let report = try await FeedbackTests.job(harness, configuration: withoutCertificate).run()
            #expect(!report.serviceRead)
            #expect(report.deletedByInvalidTokens == 1)
            #expect(report.description.hasPrefix("Feedback: no feedback service (HTTP/2), 1 users deleted, 0 kept"))
            #expect(harness.simulator.state.counters.feedbackConnections == 0)
            #expect(try await FeedbackTests.users(harness) == "user 1")
        }
    }

    /// Chat messages should arrive in the order they were queued. NIOHTTP2 sends the DATA frames of one flush in
    /// hash-set order, so the client flushes after each request (one TLS write per batch all the same).
    @Test func notificationsReachTheGatewayInQueueOrderOverOneConnection() async throws {
        try await PushHarness.run { harness in
            try await harness.queue(2000)
            // A generous request timeout: this is about order; a debug build on a slow machine answers 1,000 streams
            // in more than the default test timeout of 2 s, and a timeout resends (see the timeout tests).
            var setup = try harness.http2()
            setup.0.push.requestTimeout = .seconds(20)
            let start = ContinuousClock.now
            try await harness.withHTTP2Daemon(setup) {
                try await harness.waitUntilAllSent(2000)
            }
            print("2,000 rows over one HTTP/2 connection in \(start.duration(to: .now))")
            let tokens = harness.simulator.state.accepted.map(\.token)
            #expect(tokens.count == 2000)
            #expect(tokens == (1...2000).map(PushHarness.token), "in queue order")
        }
    }

    /// Every HTTP/2 connection starts with a 65,535-byte window each way; both ends must grant more as it is used.
    @Test func moreThanTheInitialConnectionWindowFlowsBothWaysOnOneConnection() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.unregisteredTokens = Set((1001...2600).map(PushHarness.token))
        try await PushHarness.run(simulator: simulator) { harness in
            // 400 rows of 2 KB: 800 KB of DATA to the server, twelve times its initial window.
            let alert = String(repeating: "x", count: 2000)
            try await harness.queue(400, payload: #"{"aps":{"alert":"\#(alert)"}}"#)
            // 1,600 answers of 410 with a JSON body (about 55 bytes each): 88 KB of DATA back to the client.
            try await harness.queue(1600, from: 1001)
            // A generous request timeout: this is about flow control, and a slow run must not turn into timeouts.
            var setup = try harness.http2()
            setup.0.push.requestTimeout = .seconds(20)
            try await harness.withHTTP2Daemon(setup) {
                try await harness.waitUntil(timeout: .seconds(60), "400 sent and 1,600 failed") {
                    try await harness.sentAndFailed() == [400, 1600]
                }
            }
            #expect(harness.simulator.state.counters.connections == 1, "no connection was given up for lack of window")
            #expect(harness.simulator.state.counters.accepted == 400, "nothing sent twice")
            #expect(try await harness.count("attempts > 1") == 0)
        }
    }

    /// `apns_connections` is the most over HTTP/2: more open while the open ones' streams are all busy with rows
    /// waiting, and the extra ones close when idle.
    @Test func extraConnectionsOpenWhileTheStreamsAreSaturatedAndCloseWhenIdle() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.http2.maxConcurrentStreams = 4
        try await PushHarness.run(simulator: simulator) { harness in
            try await harness.queue(3000)
            var (configuration, _) = try harness.http2()
            configuration.push.connections = 3
            configuration.push.connectionIdle = .seconds(1)
            configuration.push.requestTimeout = .seconds(20)
            try await harness.withDaemonStatus(configuration) { port in
                try await harness.waitUntil(timeout: .seconds(90), "3,000 rows are sent") {
                    try await harness.count("time_sent IS NOT NULL") == 3000
                }
                let used = Set(harness.simulator.state.accepted.map(\.connection))
                #expect(used.count >= 2 && used.count <= 3, "connections used: \(used)")
                try await harness.waitUntil(timeout: .seconds(15), "the extra connections close when idle") {
                    try await LoopbackHTTP.scrape(port: port)[#"pushchat_gateway_connected{app="default",platform="apns"}"#] == 1
                }
            }
            #expect(harness.simulator.state.counters.accepted == 3000, "nothing sent twice")
        }
    }

    /// With few rows the streams never fill: one connection.
    @Test func aLightQueueKeepsOneConnection() async throws {
        try await PushHarness.run { harness in
            try await harness.queue(50)
            var (configuration, _) = try harness.http2()
            configuration.push.connections = 4
            try await harness.withDaemonStatus(configuration) { _ in
                try await harness.waitUntilAllSent(50)
            }
            #expect(harness.simulator.state.counters.connections == 1)
        }
    }

    @Test func tooManyRequestsAndServiceUnavailableAreRetried() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.http2.unavailableRequests = 3
        simulator.http2.throttledTokens = [PushHarness.token(5)]
        try await PushHarness.run(simulator: simulator) { harness in
            try await harness.queue(10)
            try await harness.withHTTP2Daemon(try harness.http2()) {
                try await harness.waitUntilAllSent(10, timeout: .seconds(40))
            }
            #expect(harness.simulator.state.accepted.count == 10)
            #expect(harness.simulator.state.counters.rejectedByStatus["503 ServiceUnavailable"] == 3)
            #expect(harness.simulator.state.counters.rejectedByStatus["429 TooManyRequests"] == 1)
            #expect(try await harness.count("time_failed IS NOT NULL") == 0)
        }
    }

    /// Retryable answers are not retried forever: after push_max_attempts writes, or past push_max_age for a row
    /// without an expiration (expiration 0, "once", counts as none), the row fails saying why.
    @Test func retryableAnswersGiveUpAfterTheAttemptsOrTheAgeLimit() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.http2.unavailableRequests = 1000  // every request: 503 ServiceUnavailable
        try await PushHarness.run(simulator: simulator) { harness in
            let ids = try await harness.queue(3)
            try await TestDatabase.withConnection(harness.url) { connection in
                // Row 2: queued 25 hours ago to be delivered once (expiration 0); row 3: an expiration 2 days ahead.
                try await connection.query(
                    """
                    UPDATE push_queue SET time_queued = now() - interval '25 hours', expiration = 'epoch' WHERE message_id = \(ids[1]);
                    """,
                    logger: TestDatabase.logger
                )
                try await connection.query(
                    "UPDATE push_queue SET time_queued = now() - interval '25 hours', expiration = now() + interval '2 days' WHERE message_id = \(ids[2])",
                    logger: TestDatabase.logger
                )
            }
            var (configuration, authentication) = try harness.http2()
            configuration.push.maxAttempts = 3
            try await harness.withHTTP2Daemon((configuration, authentication)) {
                // Row 2 fails at its first answer (too old); rows 1 and 3 at their third (row 3's own expiration is
                // days ahead, so only the attempts bound it).
                try await harness.waitUntil(timeout: .seconds(40), "every row has failed") {
                    try await harness.count("time_failed IS NOT NULL") == 3
                }
            }
            let errors = try await TestDatabase.scalar(
                harness.url,
                "SELECT string_agg(attempts || ': ' || last_error, ' | ' ORDER BY message_id) FROM push_deliveries",
                as: String.self
            )
            #expect(
                errors
                    == "3: gave up after 3 attempts: ServiceUnavailable | 1: gave up after 1 attempts: ServiceUnavailable | 3: gave up after 3 attempts: ServiceUnavailable",
                "\(errors)"
            )
            #expect(harness.simulator.state.counters.rejectedByStatus["503 ServiceUnavailable"] == 7)
            #expect(harness.simulator.state.accepted.isEmpty)
        }
    }

    @Test func goAwayMidBatchLosesNothing() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.http2.goAwayAfterStreams = 50
        try await PushHarness.run(simulator: simulator) { harness in
            try await harness.queue(400)
            try await harness.withHTTP2Daemon(try harness.http2()) {
                try await harness.waitUntilAllSent(400)
            }
            let accepted = harness.simulator.state.accepted
            #expect(Set(accepted.map(\.token)).count == 400, "every row arrived")
            #expect(accepted.count == 400, "streams after GOAWAY's last id were not processed, so none twice")
            #expect(harness.simulator.state.counters.connections >= 8)
        }
    }

    /// Rows stay leased while they wait for their answer, however long past `push_lease`: the lease keeper renews
    /// them, so another daemon's keeper and claims never take them (they would be sent twice).
    @Test func leasesAreRenewedWhileRowsWaitForTheirAnswer() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.http2.answerDelay = .seconds(4)
        try await PushHarness.run(simulator: simulator) { harness in
            try await harness.queue(20)
            var (configuration, authentication) = try harness.http2()
            configuration.push.lease = .milliseconds(1200)
            configuration.push.settle = .milliseconds(100)
            configuration.push.requestTimeout = .seconds(10)
            let client = Database.makeClient(
                url: harness.url,
                applicationName: "other-daemon",
                keepOpen: false,
                logger: TestDatabase.logger
            )
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask { await client.run() }
                let other = PushQueue(client: client, instance: "other:1", lease: .seconds(30), logger: TestDatabase.logger)
                try await harness.withHTTP2Daemon((configuration, authentication)) {
                    try await harness.waitUntil("every row is in flight") {
                        try await harness.count("claimed_by = 'test-http2-daemon'") == 20
                    }
                    // Three leases long: unrenewed, they would have lapsed twice over.
                    let until = ContinuousClock.now + .milliseconds(3600)
                    var taken = 0
                    while ContinuousClock.now < until {
                        _ = try await other.reclaimExpired(keeping: [])
                        taken += try await other.claim(limit: 100).count
                        try await Task.sleep(for: .milliseconds(200))
                    }
                    #expect(taken == 0, "another daemon took rows that were in flight")
                    #expect(try await harness.count("time_sent IS NOT NULL") == 0, "the answers were still on their way")
                    try await harness.waitUntilAllSent(20)
                }
                group.cancelAll()
            }
            #expect(harness.simulator.state.accepted.count == 20, "each once")
        }
    }

    @Test func aPeerThatNeverAnswersTimesOutAndTheRowsAreResent() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.http2.silentRequests = 5
        try await PushHarness.run(simulator: simulator) { harness in
            try await harness.queue(5)
            let start = ContinuousClock.now
            try await harness.withHTTP2Daemon(try harness.http2()) {
                try await harness.waitUntilAllSent(5)
            }
            #expect(start.duration(to: .now) >= .seconds(2), "sent again only after the 2 s request timeout")
            #expect(harness.simulator.state.accepted.count == 5)
        }
    }

    @Test func refusedCredentialsKeepRowsQueued() async throws {
        try await PushHarness.run { harness in
            try await harness.queue(3)
            let (configuration, _) = try harness.http2(keyFile: "AuthKey_OTHERKEY01.p8")
            try await harness.withDaemonStatus(configuration) { port in
                try await harness.waitUntil("the rows are put back with the reason") {
                    try await harness.count("last_status = '403' AND last_error = 'InvalidProviderToken'") == 3
                }
                // Counted by app and platform, for an alert that tells one app's revoked key from Apple being down.
                let scrape = try await LoopbackHTTP.scrape(port: port)
                #expect(scrape.number(#"pushchat_credentials_refused_total{app="default",platform="apns"}"#) >= 3)
            }
            #expect(try await harness.count("time_sent IS NULL AND time_failed IS NULL") == 3, "kept queued")
            #expect(harness.simulator.state.accepted.isEmpty)
        }
    }
}
