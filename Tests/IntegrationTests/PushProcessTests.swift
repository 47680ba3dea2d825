import Foundation
import PostgresNIO
import Testing

@testable import API
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support

/// The `pushchat-push` executable as an operator runs it: signals, crashes, restarts.
@Suite(.serialized) struct PushProcessTests {
    /// Starts the daemon binary; returns the process and a pipe with its output.
    static func start(_ environment: [String: String]) throws -> (Process, Pipe) {
        let process = Executable(name: "pushchat-push").process(["development"], environment: environment)
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        return (process, output)
    }

    /// The rows a (dead) daemon process holds, claimed under its `host:pid` and not settled: only these may reach the
    /// gateway twice. Their message ids (the binary interface's identifiers).
    static func held(by daemon: Process, in url: DatabaseURL) async throws -> Set<UInt32> {
        Set(try await heldRows(by: daemon, in: url).map { UInt32($0.id) })
    }

    /// The device tokens of the rows a (dead) daemon process holds (see ``held(by:in:)``).
    static func heldTokens(by daemon: Process, in url: DatabaseURL) async throws -> Set<String> {
        Set(try await heldRows(by: daemon, in: url).map(\.token))
    }

    static func heldRows(by daemon: Process, in url: DatabaseURL) async throws -> [(id: Int64, token: String)] {
        try await TestDatabase.withConnection(url) { connection in
            let rows = try await connection.query(
                """
                SELECT message_id, device_token FROM push_deliveries
                WHERE claimed_by LIKE '%:' || \(String(daemon.processIdentifier)) AND time_sent IS NULL AND time_failed IS NULL
                """,
                logger: TestDatabase.logger
            )
            var held: [(id: Int64, token: String)] = []
            for try await (id, token) in rows.decode((Int64, String).self) { held.append((id, token)) }
            return held
        }
    }

    /// The tokens in `accepted` that reached the gateway more than once.
    static func twice(_ accepted: [AcceptedNotification]) -> Set<String> {
        Set(accepted.reduce(into: [String: Int]()) { $0[$1.token, default: 0] += 1 }.filter { $0.value > 1 }.keys)
    }

    static func waitForExit(_ process: Process, timeout: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        return !process.isRunning
    }

    @Test func killMinus9AtAnyMomentLosesNothing() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.faults.readDelay = .milliseconds(20)  // keep rows in flight when the daemon dies
        try await PushHarness.run(simulator: simulator) { harness in
            let ids = try await harness.queue(3000)
            let environment = harness.environment(harness.configuration())
            var held = Set<UInt32>()
            for round in 1...3 {
                let (process, _) = try Self.start(environment)
                try await harness.waitUntil(timeout: .seconds(20), "round \(round) delivers something") {
                    harness.simulator.state.counters.accepted >= round * 300
                }
                kill(process.processIdentifier, SIGKILL)
                _ = try await Self.waitForExit(process, timeout: .seconds(5))
                #expect(process.terminationReason == .uncaughtSignal)
                // What it held when it died (before the next daemon can take it back): only these may arrive twice.
                held.formUnion(try await Self.held(by: process, in: harness.url))
            }
            #expect(!held.isEmpty, "they died holding rows")
            harness.simulator.state.setFaults(.init())
            let (process, _) = try Self.start(environment)
            // Rows the dead daemons held come back when their 2 s lease runs out.
            try await harness.waitUntilAllSent(3000, timeout: .seconds(60))
            process.terminate()
            #expect(try await Self.waitForExit(process, timeout: .seconds(15)))
            #expect(Set(harness.acceptedCounts.keys) == Set(ids.map { UInt32($0) }), "every row reached the gateway")
            let twice = Set(harness.acceptedCounts.filter { $0.value > 1 }.keys)
            #expect(twice.isSubset(of: held), "only what the dead daemons held may arrive twice (\(twice.subtracting(held).count) others)")
            #expect(try await harness.count("claimed_until IS NOT NULL AND time_sent IS NULL") == 0, "none stays claimed")
        }
    }

    /// Three daemons, each its own process, share one queue; kill -9 of one mid-drain loses nothing: the other two
    /// keep sending, and the rows the dead one held come back when its lease runs out. Only those may arrive twice.
    @Test func threeDaemonsShareTheQueueAndKillingOneLosesNothing() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.faults.readDelay = .milliseconds(10)
        try await PushHarness.run(simulator: simulator) { harness in
            let ids = try await harness.queue(6000)
            let environment = harness.environment(harness.configuration())
            let daemons = try (1...3).map { _ in try Self.start(environment).0 }
            try await harness.waitUntil(timeout: .seconds(20), "the three daemons deliver") {
                harness.simulator.state.counters.accepted >= 1500
            }
            let claimers = try await TestDatabase.scalar(
                harness.url,
                "SELECT count(DISTINCT claimed_by) FROM push_deliveries WHERE claimed_by IS NOT NULL",
                as: Int64.self
            )
            #expect(claimers >= 2, "more than one daemon claimed rows")
            kill(daemons[0].processIdentifier, SIGKILL)
            _ = try await Self.waitForExit(daemons[0], timeout: .seconds(5))
            // What the dead daemon held (its claims, `host:pid`, not yet stamped): only these may arrive twice.
            let held = try await Self.held(by: daemons[0], in: harness.url)
            try await harness.waitUntilAllSent(6000, timeout: .seconds(60))
            for daemon in daemons.dropFirst() { daemon.terminate() }
            for daemon in daemons.dropFirst() { #expect(try await Self.waitForExit(daemon, timeout: .seconds(15))) }
            #expect(Set(harness.acceptedCounts.keys) == Set(ids.map { UInt32($0) }), "every row reached the gateway")
            let twice = Set(harness.acceptedCounts.filter { $0.value > 1 }.keys)
            #expect(twice.isSubset(of: held), "only what the dead daemon held may arrive twice (\(twice.subtracting(held).count) others)")
            #expect(try await harness.count("claimed_until IS NOT NULL AND time_sent IS NULL") == 0, "none stays claimed")
        }
    }

    @Test func sigtermSettlesTheWindowAndExitsZero() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.faults.readDelay = .milliseconds(30)
        try await PushHarness.run(simulator: simulator) { harness in
            try await harness.queue(5000)
            let (process, output) = try Self.start(harness.environment(harness.configuration()))
            try await harness.waitUntil(timeout: .seconds(20), "sending is under way") { harness.simulator.state.counters.accepted >= 200 }
            process.terminate()  // SIGTERM
            #expect(try await Self.waitForExit(process, timeout: .seconds(20)))
            #expect(process.terminationStatus == 0)
            #expect(process.terminationReason == .exit)
            let log = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(log.contains("Push daemon started (development mode, binary to"))
            #expect(log.contains("Connection OK"))
            #expect(log.contains("Push daemon stopped"))
            // Nothing is left claimed: sent rows are stamped, the rest is back in the queue for the next daemon.
            #expect(try await harness.count("claimed_until IS NOT NULL AND time_sent IS NULL AND time_failed IS NULL") == 0)
            let sent = try await harness.count("time_sent IS NOT NULL")
            let accepted = Set(harness.simulator.state.accepted.map(\.identifier))
            #expect(sent > 0)
            #expect(Int(sent) <= accepted.count, "only what reached the gateway is stamped sent")
            // A new daemon sends the rest.
            harness.simulator.state.setFaults(.init())
            let (next, _) = try Self.start(harness.environment(harness.configuration()))
            try await harness.waitUntilAllSent(5000, timeout: .seconds(60))
            next.terminate()
            _ = try await Self.waitForExit(next, timeout: .seconds(15))
        }
    }

    /// SIGTERM after the last write: the daemon gives the gateway a moment (push_settle, at most 1 s) to object
    /// before it counts the window as accepted. An error response arriving then fails its row, the rows before it
    /// are sent, the ones after it go back to the queue.
    @Test func sigtermWaitsForALastErrorResponse() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.unregisteredTokens = [PushHarness.token(3)]
        simulator.faults.errorResponseDelay = .milliseconds(400)
        try await PushHarness.run(simulator: simulator) { harness in
            var environment = harness.environment(harness.configuration())
            environment["PUSHCHAT_PUSH_SETTLE"] = "1"
            environment["PUSHCHAT_PUSH_LEASE"] = "5"
            let (process, output) = try Self.start(environment)
            try await harness.waitUntil("connected") { harness.simulator.state.counters.connections == 1 }
            try await harness.queue(5)
            // The gateway has refused the third; its answer is 400 ms away.
            try await harness.waitUntil("the third is refused") { harness.simulator.state.counters.rejectedByStatus["8"] == 1 }
            process.terminate()  // SIGTERM
            #expect(try await Self.waitForExit(process, timeout: .seconds(20)))
            #expect(process.terminationStatus == 0)
            let rows = try await TestDatabase.scalar(
                harness.url,
                """
                SELECT string_agg(concat_ws(':', right(device_token, 2), time_sent IS NOT NULL, last_status, claimed_until IS NULL),
                                  ',' ORDER BY message_id) FROM push_deliveries
                """,
                as: String.self
            )
            let log = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(rows == "01:t:f,02:t:f,03:f:8:t,04:f:t,05:f:t", "\(log)")
        }
    }

    @Test func aBadPassphraseStopsAtStartWithOneClearLine() async throws {
        let result = try Executable(name: "pushchat-push").run(
            ["development"],
            environment: [
                "PUSHCHAT_DATABASE_URL": "postgres://u@127.0.0.1:1/db",
                "PUSHCHAT_APNS_CERTIFICATE": TestCertificates.path("ck.pem"),
                "PUSHCHAT_APNS_PASSPHRASE": "wrong-wrong",
                "PUSHCHAT_LOG_FILE": "-",
            ]
        )
        #expect(result.status == 78)
        #expect(result.standardError.contains(TestCertificates.path("ck.pem")))
        #expect(result.standardError.contains("wrong passphrase"))
        #expect(!(result.standardError + result.standardOutput).contains("wrong-wrong"))
    }

    @Test func http2ExecutableSurvivesAKillAndStopsCleanlyMidDrain() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.http2.answerDelay = .milliseconds(5)  // keep streams in flight when the daemon dies or stops
        let total = 8_000
        try await PushHarness.run(simulator: simulator) { harness in
            try await harness.queue(total)
            // One connection, and a request timeout a slow debug build cannot hit: this is about kill -9 and SIGTERM
            // (the timeout tests are elsewhere); 1,000 streams in flight take a debug simulator more than 2 s here.
            let environment = harness.environment(try harness.http2().0).merging([
                "PUSHCHAT_APNS_CONNECTIONS": "1", "PUSHCHAT_PUSH_REQUEST_TIMEOUT": "20",
            ]) { $1 }
            let (first, _) = try Self.start(environment)
            try await harness.waitUntil(timeout: .seconds(20), "the first daemon delivers something") {
                harness.simulator.state.counters.accepted >= 300
            }
            kill(first.processIdentifier, SIGKILL)
            _ = try await Self.waitForExit(first, timeout: .seconds(5))
            #expect(first.terminationReason == .uncaughtSignal)
            let heldByFirst = try await Self.heldTokens(by: first, in: harness.url)
            #expect(!heldByFirst.isEmpty, "it died holding rows")
            // SIGTERM in the middle of the drain: answers in flight are recorded, rows claimed ahead go back.
            let (second, output) = try Self.start(environment)
            let before = harness.simulator.state.counters.accepted
            try await harness.waitUntil(timeout: .seconds(20), "the second daemon is sending") {
                harness.simulator.state.counters.accepted >= before + 1500
            }
            second.terminate()
            #expect(try await Self.waitForExit(second, timeout: .seconds(15)))
            #expect(second.terminationReason == .exit)
            #expect(second.terminationStatus == 0)
            let log = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(log.contains("Push daemon started (development mode, HTTP/2 to 127.0.0.1:\(harness.ports.http2))"))
            #expect(log.contains("Connection OK (HTTP/2)"))
            #expect(log.contains("Push daemon stopped"))
            #expect(!log.contains("BEGIN PRIVATE KEY") && !log.contains("eyJ"), "neither the key nor a provider token is logged")
            let held = try await harness.count(
                "claimed_by LIKE '%:\(second.processIdentifier)' AND claimed_until IS NOT NULL AND time_sent IS NULL"
            )
            #expect(held == 0, "the stopped daemon holds no row")
            #expect(try await harness.count("time_sent IS NULL") > 0, "stopped mid-drain")
            // Rows the killed daemon held come back when their 3 s lease runs out; a third daemon sends the rest.
            let (third, _) = try Self.start(environment)
            try await harness.waitUntilAllSent(total, timeout: .seconds(90))
            third.terminate()
            #expect(try await Self.waitForExit(third, timeout: .seconds(15)))
            let accepted = harness.simulator.state.accepted
            #expect(accepted.allSatisfy { $0.format == "http2" })
            #expect(Set(accepted.map(\.token)) == Set((1...total).map(PushHarness.token)), "every row reached the gateway")
            let twice = Self.twice(accepted)
            #expect(
                twice.isSubset(of: heldByFirst),
                "only what the killed daemon held may arrive twice (\(twice.subtracting(heldByFirst).count) others)"
            )
            #expect(try await harness.count("claimed_until IS NOT NULL AND time_sent IS NULL") == 0, "none stays claimed")
        }
    }

    @Test func http2WithoutUsableCredentialsStopsAtStartNamingTheSetting() throws {
        let base = [
            "PUSHCHAT_DATABASE_URL": "postgres://u@127.0.0.1:1/db",
            "PUSHCHAT_APNS_TRANSPORT": "http2",
            "PUSHCHAT_APNS_HOST": "127.0.0.1:1",
            "PUSHCHAT_APNS_KEY_FILE": TestCertificates.path("AuthKey_DEVKEY0001.p8"),
            "PUSHCHAT_APNS_KEY_ID": PushHarness.keyID,
            "PUSHCHAT_APNS_TEAM_ID": PushHarness.teamID,
            "PUSHCHAT_APNS_TOPIC": PushHarness.topic,
            "PUSHCHAT_LOG_FILE": "-",
        ]
        let daemon = Executable(name: "pushchat-push")
        let noTopic = try daemon.run(["development"], environment: base.merging(["PUSHCHAT_APNS_TOPIC": ""]) { $1 })
        #expect(noTopic.status == 78)
        #expect(noTopic.standardError.contains("PUSHCHAT_APNS_TOPIC"))
        // The key id comes from Apple's file name: an id that names another key is refused, naming both.
        let contradicting = try daemon.run(["development"], environment: base.merging(["PUSHCHAT_APNS_KEY_ID": "OTHERKEY01"]) { $1 })
        #expect(contradicting.status == 78)
        #expect(contradicting.standardError.contains("PUSHCHAT_APNS_KEY_ID") && contradicting.standardError.contains("DEVKEY0001"))
        // A file named otherwise needs the id.
        let unnamed = NSTemporaryDirectory() + "signing-\(UUID().uuidString).p8"
        try FileManager.default.copyItem(atPath: TestCertificates.path("AuthKey_DEVKEY0001.p8"), toPath: unnamed)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: unnamed)
        defer { try? FileManager.default.removeItem(atPath: unnamed) }
        let noKeyID = try daemon.run(
            ["development"],
            environment: base.merging(["PUSHCHAT_APNS_KEY_FILE": unnamed, "PUSHCHAT_APNS_KEY_ID": ""]) { $1 }
        )
        #expect(noKeyID.status == 78)
        #expect(noKeyID.standardError.contains("PUSHCHAT_APNS_KEY_ID"))
        let missingKey = try daemon.run(
            ["development"],
            environment: base.merging(["PUSHCHAT_APNS_KEY_FILE": "/nonexistent/AuthKey.p8"]) { $1 }
        )
        #expect(missingKey.status == 78)
        #expect(missingKey.standardError.contains("/nonexistent/AuthKey.p8"))
    }
}
