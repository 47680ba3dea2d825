import Foundation
import PostgresNIO
import Testing

@testable import API
@testable import APIServer
@testable import APNs
@testable import Observability
@testable import Push
@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support

/// The push daemon against a real PostgreSQL and the simulator over real TLS. Serialized: the binary protocol has no
/// acknowledgements, so a CPU-starved gateway that reads later than the settle time cannot be told from one that accepted.
@Suite(.serialized) struct PushDaemonTests {
    @Test func endToEndThroughTheAPI() async throws {
        try await PushHarness.run { harness in
            let api = APIHarness.configuration(url: harness.daemonURL)
            try await harness.withDaemon {
                try await APIHarness.run(configuration: api, ownerURL: harness.url) { client in
                    try await client.post(["cmd": "join", "udid": Device.udid(1), "token": Device.token(1), "name": "Ann", "code": "room"])
                    try await client.post(["cmd": "join", "udid": Device.udid(2), "token": Device.token(2), "name": "Bob", "code": "room"])
                    try await client.post(["cmd": "message", "udid": Device.udid(1), "text": "Hello Bob"])
                }
                try await harness.waitUntilAllSent(1)
            }
            let accepted = harness.simulator.state.accepted
            #expect(accepted.count == 1)
            #expect(accepted.first?.token == Device.token(2))
            #expect(
                accepted.first?.payload
                    == #"{"aps":{"alert":"Ann: Hello","sound":"default"}}"#.replacingOccurrences(of: "Hello", with: "Hello Bob")
            )
            #expect(accepted.first?.format == "frame")
            #expect(accepted.first?.priority == 10)
            let row = try await TestDatabase.scalar(
                harness.url,
                "SELECT concat_ws('|', message_id, time_sent IS NOT NULL, attempts, claimed_by) FROM push_deliveries",
                as: String.self
            )
            #expect(row == "\(accepted.first!.identifier)|t|1|test-daemon-1")
        }
    }

    @Test func aRejectedTokenMidBatchFailsAloneAndTheRestIsDelivered() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.unregisteredTokens = [PushHarness.token(37)]
        try await PushHarness.run(simulator: simulator) { harness in
            let ids = try await harness.queue(100)
            try await harness.withDaemon {
                try await harness.waitUntil("99 sent and 1 failed") {
                    try await harness.sentAndFailed() == [99, 1]
                }
            }
            let failed = try await TestDatabase.scalar(
                harness.url,
                "SELECT concat_ws('|', device_token, last_status, last_error) FROM push_deliveries WHERE time_failed IS NOT NULL",
                as: String.self
            )
            #expect(failed == "\(PushHarness.token(37))|8|invalid token")
            // Status 8 means "not valid for this topic and environment": the notification fails, no user is ever
            // deleted for it (only feedback-service tuples do that on this interface).
            let recorded = try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM invalid_tokens", as: Int64.self)
            #expect(recorded == 0)
            let counts = harness.acceptedCounts
            #expect(Set(counts.keys) == Set(ids.filter { $0 != ids[36] }.map { UInt32($0) }))
            #expect(harness.simulator.state.counters.rejectedByStatus == ["8": 1])
        }
    }

    /// A row past its expiry is failed as expired, never sent; a row without its own expiry carries the same one on
    /// every attempt: `apns_expiry` after it was queued, not after each send.
    @Test func expiredRowsFailAndTheExpiryIsTheRowsOriginalOne() async throws {
        try await PushHarness.run { harness in
            let ids = try await harness.queue(2)
            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query(
                    "UPDATE push_queue SET expiration = now() - interval '1 minute' WHERE message_id = \(ids[0])",
                    logger: TestDatabase.logger
                )
                try await connection.query(
                    "UPDATE push_queue SET time_queued = now() - interval '1000 seconds' WHERE message_id = \(ids[1])",
                    logger: TestDatabase.logger
                )
            }
            try await harness.withDaemon {
                try await harness.waitUntil("1 sent, 1 failed") { try await harness.sentAndFailed() == [1, 1] }
            }
            let failed = try await TestDatabase.scalar(
                harness.url,
                "SELECT message_id || '|' || last_status || '|' || last_error FROM push_deliveries WHERE time_failed IS NOT NULL",
                as: String.self
            )
            #expect(failed == "\(ids[0])|expired|expired before it could be sent")
            let queuedAt = try await TestDatabase.scalar(
                harness.url,
                "SELECT extract(epoch FROM time_queued)::float8 FROM push_deliveries WHERE message_id = \(ids[1])",
                as: Double.self
            )
            let sent = try #require(harness.simulator.state.accepted.first)
            #expect(abs(Double(sent.expiry) - (queuedAt + 86_400)) <= 1, "apns_expiry after it was queued")
            #expect(harness.simulator.state.accepted.count == 1)
        }
    }

    /// A gateway that stops reading (its socket full, no error, no close): past push_stall_timeout the connection is
    /// dead, /readyz says so, and its notifications go out again on a new connection once the gateway reads again.
    @Test func aGatewayThatStopsReadingIsClosedAndNothingIsLost() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.faults.readDelay = .seconds(5)  // after each read the gateway reads nothing for 5 s
        try await PushHarness.run(simulator: simulator) { harness in
            // About 15 MB: far more than the sockets between the daemon and the gateway hold.
            let payload = #"{"aps":{"alert":"\#(String(repeating: "x", count: 1900))"}}"#
            let ids = try await harness.queue(8000, payload: payload)
            var configuration = harness.configuration()
            configuration.push.stallTimeout = .seconds(1)
            try await harness.withDaemonStatus(configuration) { port in
                try await harness.waitUntil(timeout: .seconds(30), "the stall is seen") {
                    try await LoopbackHTTP.get(port: port, path: "/readyz").body.contains("stopped reading")
                }
                try await harness.waitUntil("the daemon connects again") {
                    try await LoopbackHTTP.scrape(port: port).number("pushchat_gateway_reconnects") >= 1
                }
                let scrape = try await LoopbackHTTP.scrape(port: port)
                #expect(scrape.number("pushchat_push_resent") >= 1, "what was in flight on the stalled connection goes out again")
                harness.simulator.state.setFaults(SimulatorConfiguration.Faults())
                try await harness.waitUntil(timeout: .seconds(60), "everything sent") {
                    try await harness.sentAndFailed() == [8000, 0]
                }
                try await harness.waitUntil("ready again") { try await LoopbackHTTP.get(port: port, path: "/readyz").status == 200 }
            }
            // The binary interface never acknowledges: rows the gateway's kernel took before it stopped reading and that
            // stayed silent for push_settle count as accepted (docs: the sent window); the gateway reads them once it
            // reads again. What was still in flight when the stall was detected reached it on the next connection.
            let wanted = Set(ids.map { UInt32($0) })
            try await harness.waitUntil("the gateway got every row") { Set(harness.acceptedCounts.keys) == wanted }
            #expect(Set(harness.acceptedCounts.keys).subtracting(wanted).isEmpty, "nothing but the queued rows")
        }
    }

    @Test func rowsThatCanNeverBeSentFailAtOnceWithAReason() async throws {
        try await PushHarness.run { harness in
            try await harness.queue(3)
            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query(
                    """
                    INSERT INTO push_queue (device_token, payload) VALUES
                        ('not-hex', '{"aps":{}}'), (repeat('a', 62), '{"aps":{}}'), (repeat('b', 64), repeat('x', 2049))
                    """,
                    logger: TestDatabase.logger
                )
            }
            try await harness.withDaemon {
                try await harness.waitUntil("3 sent, 3 failed") {
                    try await harness.sentAndFailed() == [3, 3]
                }
            }
            let reasons = try await TestDatabase.scalar(
                harness.url,
                "SELECT string_agg(last_status || ': ' || last_error, '; ' ORDER BY message_id) FROM push_deliveries WHERE time_failed IS NOT NULL",
                as: String.self
            )
            #expect(
                reasons
                    == "invalid: device token is not 64 hex digits; invalid: device token is not 64 hex digits; invalid: payload of 2049 bytes exceeds the binary limit of 2048"
            )
            #expect(harness.simulator.state.counters.rejectedByStatus.isEmpty, "nothing unsendable reached the gateway")
        }
    }

    @Test func abruptDropsLoseNothing() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.faults.closeAfterFrames = 37
        try await PushHarness.run(simulator: simulator) { harness in
            let ids = try await harness.queue(500)
            try await harness.withDaemon {
                try await harness.waitUntilAllSent(500)
            }
            let counts = harness.acceptedCounts
            #expect(Set(counts.keys) == Set(ids.map { UInt32($0) }), "every row reached the gateway")
            #expect(harness.simulator.state.counters.abruptCloses >= 13)
        }
    }

    @Test func shutdownResponsesResendTheRestWithoutDuplicates() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.faults.shutdownAfterFrames = 50
        try await PushHarness.run(simulator: simulator) { harness in
            let ids = try await harness.queue(400)
            try await harness.withDaemon {
                try await harness.waitUntilAllSent(400)
            }
            let counts = harness.acceptedCounts
            #expect(Set(counts.keys) == Set(ids.map { UInt32($0) }))
            #expect(counts.values.allSatisfy { $0 == 1 }, "status 10 names the last accepted: nothing is sent twice")
        }
    }

    @Test func processingErrorsAreRetriedABoundedNumberOfTimes() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.faults.processingErrorTokens = [PushHarness.token(5)]
        try await PushHarness.run(simulator: simulator) { harness in
            try await harness.queue(10)
            var configuration = harness.configuration()
            configuration.push.maxRetries = 2
            try await harness.withDaemon(configuration) {
                try await harness.waitUntil("9 sent, 1 failed") {
                    try await harness.sentAndFailed() == [9, 1]
                }
            }
            #expect(harness.simulator.state.counters.rejectedByStatus == ["1": 3], "the first try and two retries")
            let reason = try await TestDatabase.scalar(
                harness.url,
                "SELECT last_status FROM push_deliveries WHERE time_failed IS NOT NULL",
                as: String.self
            )
            #expect(reason == "1")
        }
    }

    @Test func twoDaemonsShareTheQueueWithoutSendingARowTwice() async throws {
        try await PushHarness.run { harness in
            let ids = try await harness.queue(3000)
            var first = harness.configuration()
            first.push.batchSize = 50
            var second = first
            second.push.connections = 2
            try await harness.withDaemons([first, second]) {
                try await harness.waitUntilAllSent(3000, timeout: .seconds(60))
            }
            let counts = harness.acceptedCounts
            #expect(Set(counts.keys) == Set(ids.map { UInt32($0) }))
            #expect(counts.values.allSatisfy { $0 == 1 }, "no row sent twice")
            let senders = try await TestDatabase.scalar(
                harness.url,
                "SELECT count(DISTINCT claimed_by) FROM push_deliveries",
                as: Int64.self
            )
            #expect(senders == 2, "both daemons took part")
            #expect(Set(harness.simulator.state.accepted.map(\.connection)).count == 3, "three connections shared the work")
        }
    }

    @Test func wakesOnNotifyWithoutWaitingForThePoll() async throws {
        try await PushHarness.run { harness in
            var configuration = harness.configuration()
            configuration.pollInterval = .seconds(60)
            try await harness.withDaemon(configuration) {
                try await harness.waitUntil("the daemon is connected") { harness.simulator.state.counters.connections == 1 }
                // Its LISTEN is in place (else the NOTIFY below would be lost and only the 60 s poll would find the row).
                try await harness.waitUntil("the daemon listens") {
                    try await TestDatabase.scalar(
                        harness.url,
                        "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'",
                        as: Int64.self
                    ) >= 1
                }
                let start = ContinuousClock.now
                try await harness.queue(1)
                try await harness.waitUntil(timeout: .seconds(10), "the notification arrives") {
                    harness.simulator.state.counters.accepted == 1
                }
                #expect(ContinuousClock.now - start < .seconds(5), "NOTIFY, not the 60 s poll")
            }
        }
    }

    @Test func aRefusedCertificateBacksOffAndKeepsTheRows() async throws {
        try await PushHarness.run { harness in
            try await harness.queue(5)
            let configuration = harness.configuration(certificate: "other-ck.pem", passphrase: nil)
            let start = ContinuousClock.now
            try await harness.withDaemon(configuration) {
                try await harness.waitUntil("it keeps trying") { harness.simulator.state.counters.connections >= 3 }
            }
            // Backoff waits 0.5–1 s after the first refusal, 1–2 s after the second: a loop would take milliseconds.
            #expect(start.duration(to: .now) >= .milliseconds(1500), "with backoff (1 s, 2 s, …), not in a loop")
            #expect(try await harness.count("time_sent IS NULL AND time_failed IS NULL AND claimed_until IS NULL") == 5, "rows stay queued")
        }
    }

    @Test func survivesTheDatabaseGoingAwayAndKeepsTheGatewayConnection() async throws {
        try await PushHarness.run { harness in
            let role = "push_outage_\(UInt32.random(in: 0...UInt32.max))"
            try await TestDatabase.withConnection(harness.url) { connection in
                for statement in [
                    "CREATE ROLE \(role) LOGIN",
                    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO \(role)",
                    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO \(role)",
                ] {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: TestDatabase.logger)
                }
            }
            var daemonURL = harness.url
            daemonURL.username = role
            try await harness.withDaemon(harness.configuration(url: daemonURL)) {
                try await harness.queue(10)
                try await harness.waitUntilAllSent(10)
                // The database goes away for the daemon: its sessions end and it cannot log in again.
                try await TestDatabase.withConnection(harness.url) { connection in
                    try await connection.query(PostgresQuery(unsafeSQL: "ALTER ROLE \(role) NOLOGIN"), logger: TestDatabase.logger)
                    try await connection.query(
                        PostgresQuery(unsafeSQL: "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '\(role)'"),
                        logger: TestDatabase.logger
                    )
                }
                try await harness.queue(10, from: 100)
                try await Task.sleep(for: .seconds(2))
                #expect(try await harness.count("time_sent IS NOT NULL") == 10, "nothing can be claimed while the database is away")
                try await TestDatabase.withConnection(harness.url) { connection in
                    try await connection.query(PostgresQuery(unsafeSQL: "ALTER ROLE \(role) LOGIN"), logger: TestDatabase.logger)
                }
                try await harness.waitUntilAllSent(20)
            }
            #expect(harness.simulator.state.counters.connections == 1, "the gateway connection was kept throughout")
            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query(PostgresQuery(unsafeSQL: "DROP OWNED BY \(role)"), logger: TestDatabase.logger)
            }
            try await TestDatabase.admin(try TestDatabase.serverURL(), "DROP ROLE \(role)")
        }
    }
}
