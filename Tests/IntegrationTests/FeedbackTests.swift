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

/// The feedback job against the simulator's feedback service and a real PostgreSQL.
@Suite struct FeedbackTests {
    static let dayAgo = Date().addingTimeInterval(-86_400)

    /// Users 1…n, each with token n, registered `registeredAgo` seconds ago.
    static func addUsers(_ harness: PushHarness, _ numbers: [Int], registeredAgo seconds: Int) async throws {
        try await TestDatabase.withConnection(harness.url) { connection in
            for n in numbers {
                try await connection.query(
                    """
                    INSERT INTO active_users (udid, device_token, nickname, secret_code, token_updated_at)
                    VALUES (\(Device.udid(n)), \(PushHarness.token(n)), \("user \(n)"), 'room', now() - make_interval(secs => \(Double(seconds))))
                    """,
                    logger: TestDatabase.logger
                )
            }
        }
    }

    static func tuple(_ n: Int, at date: Date) -> FeedbackTuple {
        FeedbackTuple(timestamp: UInt32(date.timeIntervalSince1970), token: DeviceToken.bytes(hex: PushHarness.token(n))!)
    }

    static func users(_ harness: PushHarness) async throws -> String {
        try await TestDatabase.scalar(
            harness.url,
            "SELECT coalesce(string_agg(nickname, ',' ORDER BY nickname), '') FROM active_users",
            as: String.self
        )
    }

    static func job(_ harness: PushHarness, configuration: Configuration? = nil, timeout: Duration = .seconds(5)) throws -> FeedbackJob {
        try FeedbackJob(configuration: configuration ?? harness.configuration(), timeout: timeout, logger: TestDatabase.logger)
    }

    @Test func deletesOnlyUsersWhoDidNotRegisterAgainAndIsIdempotent() async throws {
        try await PushHarness.run { harness in
            try await Self.addUsers(harness, [1, 2], registeredAgo: 2 * 86_400)  // before the report: deleted
            try await Self.addUsers(harness, [3], registeredAgo: 60)  // registered again after the report: kept
            try await Self.addUsers(harness, [4], registeredAgo: 2 * 86_400)  // not reported: kept
            harness.simulator.state.setFeedback([
                Self.tuple(1, at: Self.dayAgo), Self.tuple(2, at: Self.dayAgo), Self.tuple(3, at: Self.dayAgo),
            ])
            let report = try await Self.job(harness).run()
            #expect(report.tuplesRead == 3)
            #expect(report.deletedByFeedback == 2)
            #expect(report.keptByFeedback == 1)
            #expect(report.description.hasPrefix("Feedback: 3 tuples read, 2 users deleted, 1 kept because re-registered"))
            #expect(try await Self.users(harness) == "user 3,user 4")

            // Apple has cleared its list; and even the same tuples again change nothing.
            let second = try await Self.job(harness).run()
            #expect(second.tuplesRead == 0 && second.usersDeleted == 0)
            harness.simulator.state.setFeedback([Self.tuple(1, at: Self.dayAgo), Self.tuple(3, at: Self.dayAgo)])
            let third = try await Self.job(harness).run()
            #expect(third.usersDeleted == 0)
            #expect(third.keptByFeedback == 1)
            #expect(try await Self.users(harness) == "user 3,user 4")
        }
    }

    /// Binary status 8 says "not valid for this topic and environment", not "gone": the daemon fails the row, and
    /// neither it nor the feedback job that runs after it deletes the chat user or the provider device of that token.
    @Test func binaryStatusEightNeverLeadsToADeletion() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.unregisteredTokens = [PushHarness.token(1)]
        try await PushHarness.run(simulator: simulator) { harness in
            try await Self.addUsers(harness, [1, 2], registeredAgo: 2 * 86_400)
            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query(
                    "INSERT INTO devices (device_token, registered_by) VALUES (\(PushHarness.token(1)), 'k')",
                    logger: TestDatabase.logger
                )
                try await connection.query(
                    "INSERT INTO push_queue (device_token, payload) VALUES (\(PushHarness.token(1)), '{}'), (\(PushHarness.token(2)), '{}')",
                    logger: TestDatabase.logger
                )
            }
            try await harness.withDaemon {
                try await harness.waitUntil("one sent, one failed") { try await harness.sentAndFailed() == [1, 1] }
            }
            #expect(harness.simulator.state.counters.rejectedByStatus == ["8": 1])
            let report = try await Self.job(harness).run()
            #expect(report.usersDeleted == 0)
            #expect(report.invalidTokensProcessed == 0, "nothing was reported for the feedback job")
            #expect(try await Self.users(harness) == "user 1,user 2")
            #expect(try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM devices", as: Int64.self) == 1)
            #expect(try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM invalid_tokens", as: Int64.self) == 0)
        }
    }

    @Test func processesThePushDaemonsInvalidTokensOnce() async throws {
        try await PushHarness.run { harness in
            try await Self.addUsers(harness, [1], registeredAgo: 7200)
            try await Self.addUsers(harness, [2], registeredAgo: 60)
            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query(
                    """
                    INSERT INTO invalid_tokens (device_token, reported_at, source) VALUES
                        (\(PushHarness.token(1)), now() - interval '1 hour', 'binary status 8'),
                        (\(PushHarness.token(2)), now() - interval '1 hour', 'binary status 8')
                    """,
                    logger: TestDatabase.logger
                )
            }
            let report = try await Self.job(harness).run()
            #expect(report.invalidTokensProcessed == 2)
            #expect(report.deletedByInvalidTokens == 1)
            #expect(report.keptByInvalidTokens == 1)
            #expect(try await Self.users(harness) == "user 2")
            #expect(
                try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM invalid_tokens WHERE processed_at IS NULL", as: Int64.self)
                    == 0
            )
            let again = try await Self.job(harness).run()
            #expect(again.invalidTokensProcessed == 0)
        }
    }

    @Test func manyTuplesAreHandledInBatches() async throws {
        try await PushHarness.run { harness in
            let count = FeedbackStore.batchSize + 2500
            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query(
                    """
                    INSERT INTO active_users (udid, device_token, nickname, secret_code, token_updated_at)
                    SELECT lpad(to_hex(g), 40, '0'), lpad(to_hex(g), 64, '0'), 'user ' || g, 'room', now() - interval '2 days'
                    FROM generate_series(1, \(count + 10)) g
                    """,
                    logger: TestDatabase.logger
                )
            }
            harness.simulator.state.setFeedback((1...count).map { Self.tuple($0, at: Self.dayAgo) })
            let report = try await Self.job(harness).run()
            #expect(report.tuplesRead == count)
            #expect(report.deletedByFeedback == count)
            #expect(try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM active_users", as: Int64.self) == 10)
        }
    }

    @Test func aTruncatedLastTupleIsIgnoredAndTheRestApplied() async throws {
        try await PushHarness.run { harness in
            try await Self.addUsers(harness, [1, 2], registeredAgo: 2 * 86_400)
            harness.simulator.state.setFeedback([Self.tuple(1, at: Self.dayAgo)], fault: .truncated)
            let report = try await Self.job(harness).run()
            #expect(report.tuplesRead == 1)
            #expect(report.truncatedBytes > 0)
            #expect(report.description.contains("truncated"))
            #expect(try await Self.users(harness) == "user 2")
        }
    }

    /// An independent feedback service closes the TCP connection without TLS close_notify: the whole tuples before
    /// that count, a trailing partial tuple is counted and ignored.
    @Test func aServiceThatClosesUncleanlyIsReadToItsLastWholeTuple() async throws {
        try await PushHarness.run { harness in
            try await Self.addUsers(harness, [1, 2, 3], registeredAgo: 2 * 86_400)
            harness.simulator.state.setFeedback([Self.tuple(1, at: Self.dayAgo), Self.tuple(2, at: Self.dayAgo)], fault: .unclean)
            let report = try await Self.job(harness).run()
            #expect(report.tuplesRead == 2)
            #expect(report.uncleanShutdown)
            #expect(report.truncatedBytes == 0)
            #expect(report.deletedByFeedback == 2)
            #expect(report.description.contains("without TLS close_notify"))
            #expect(try await Self.users(harness) == "user 3")

            harness.simulator.state.setFeedback([Self.tuple(3, at: Self.dayAgo)], fault: .uncleanTruncated)
            let truncated = try await Self.job(harness).run()
            #expect(truncated.tuplesRead == 1)
            #expect(truncated.uncleanShutdown)
            #expect(truncated.truncatedBytes > 0)
            #expect(try await Self.users(harness) == "")
        }
    }

    @Test func theExecutableSucceedsAgainstAServiceThatClosesUncleanly() async throws {
        try await PushHarness.run { harness in
            try await Self.addUsers(harness, [1, 2], registeredAgo: 2 * 86_400)
            harness.simulator.state.setFeedback([Self.tuple(1, at: Self.dayAgo)], fault: .uncleanTruncated)
            var environment = harness.environment(harness.configuration())
            environment["PUSHCHAT_APNS_FEEDBACK"] = "127.0.0.1:\(harness.ports.feedback)"
            let result = try Executable(name: "pushchat-feedback").run(["development"], environment: environment)
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.standardOutput.contains("warning"), "\(result.standardOutput)")
            #expect(result.standardOutput.contains("without TLS close_notify"))
            #expect(result.standardOutput.contains("Feedback: 1 tuples read, 1 users deleted"))
            #expect(try await Self.users(harness) == "user 2")
        }
    }

    /// Apple forgets what it sent: tuples are stored before users are deleted, so a database failure in between
    /// loses nothing and the next run (which reads nothing new) finishes the work.
    @Test func aDatabaseFailureAfterReadingIsFinishedByTheNextRun() async throws {
        try await PushHarness.run { harness in
            try await Self.addUsers(harness, [1, 2, 3], registeredAgo: 2 * 86_400)
            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query(
                    """
                    CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN RAISE EXCEPTION 'deletes refused by the test'; END $$
                    """,
                    logger: TestDatabase.logger
                )
                try await connection.query(
                    "CREATE TRIGGER refuse_delete BEFORE DELETE ON active_users FOR EACH ROW EXECUTE FUNCTION refuse_delete()",
                    logger: TestDatabase.logger
                )
            }
            harness.simulator.state.setFeedback([Self.tuple(1, at: Self.dayAgo), Self.tuple(2, at: Self.dayAgo)])
            let error = await #expect(throws: FeedbackError.self) { try await Self.job(harness).run() }
            #expect(error?.description.contains("deletes refused by the test") == true, "\(String(describing: error))")
            #expect(try await Self.users(harness) == "user 1,user 2,user 3")
            let pending = try await TestDatabase.scalar(
                harness.url,
                "SELECT count(*) FROM invalid_tokens WHERE processed_at IS NULL AND source = 'feedback service'",
                as: Int64.self
            )
            #expect(pending == 2)

            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query("DROP TRIGGER refuse_delete ON active_users", logger: TestDatabase.logger)
            }
            let report = try await Self.job(harness).run()
            #expect(report.tuplesRead == 0, "Apple does not send them again")
            #expect(report.deletedByFeedback == 2)
            #expect(try await Self.users(harness) == "user 3")
        }
    }

    /// A run that would delete more users than `feedback_max_prune` deletes nobody and says why; `--force` does it.
    @Test func moreDeletionsThanTheLimitNeedForce() async throws {
        try await PushHarness.run { harness in
            try await Self.addUsers(harness, Array(1...20), registeredAgo: 2 * 86_400)
            harness.simulator.state.setFeedback((1...5).map { Self.tuple($0, at: Self.dayAgo) })
            var environment = harness.environment(harness.configuration())
            environment["PUSHCHAT_APNS_FEEDBACK"] = "127.0.0.1:\(harness.ports.feedback)"
            environment["PUSHCHAT_FEEDBACK_MAX_PRUNE"] = "10%"  // 2 of 20
            let job = Executable(name: "pushchat-feedback")
            let refused = try job.run(["development"], environment: environment)
            #expect(refused.status == 1)
            #expect(refused.standardError.contains("would delete 5 of 20 users with a token, more than feedback_max_prune (10% = 2)"))
            #expect(refused.standardError.contains("--force"))
            #expect(try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM active_users", as: Int64.self) == 20)
            let pending = try await TestDatabase.scalar(
                harness.url,
                "SELECT count(*) FROM invalid_tokens WHERE processed_at IS NULL",
                as: Int64.self
            )
            #expect(pending == 5, "Apple's tuples are kept for the next run")

            let forced = try job.run(["development", "--force"], environment: environment)
            #expect(forced.status == 0, "\(forced.standardError)")
            #expect(forced.standardOutput.contains("5 users deleted"))
            #expect(try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM active_users", as: Int64.self) == 15)
        }
    }

    /// The limit applies to the reports it checked: reports added after the check (the daemon's 410s arriving
    /// meanwhile) or renewed since wait for the next run, where the limit is checked again.
    @Test func reportsAddedAfterTheLimitCheckWaitForTheNextRun() async throws {
        try await PushHarness.run { harness in
            try await Self.addUsers(harness, Array(1...20), registeredAgo: 2 * 86_400)
            @Sendable func report(_ numbers: ClosedRange<Int>, _ ago: String) async throws {
                try await TestDatabase.withConnection(harness.url) { connection in
                    for n in numbers {
                        try await connection.query(
                            """
                            INSERT INTO invalid_tokens (device_token, reported_at, source)
                            VALUES (\(PushHarness.token(n)), now() - \(ago)::interval, 'http2 410 Unregistered')
                            ON CONFLICT (app, device_token) DO UPDATE SET reported_at = EXCLUDED.reported_at, processed_at = NULL
                            """,
                            logger: TestDatabase.logger
                        )
                    }
                }
            }
            try await report(1...2, "1 hour")
            try await TestDatabase.withFeedbackStore(harness.url) { store in
                let checked = try await store.pendingReports()
                #expect(checked.wouldDelete == 2, "within a limit of, say, 2")
                #expect(checked.tokens == [PushHarness.token(1), PushHarness.token(2)])
                // Between the check and the deletions: 8 new reports, and token 2's report renewed.
                try await report(3...10, "10 minutes")
                try await report(2...2, "5 minutes")
                let applied = try await store.applyInvalidTokens(checked)
                #expect(applied.daemon.processed == 1, "only token 1's report is as it was checked")
                #expect(applied.daemon.deleted == 1)
                #expect(try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM active_users", as: Int64.self) == 19)
                let next = try await store.pendingReports()
                #expect(next.tokens.count == 9, "the renewed one and the 8 new ones wait for the next run's check")
                #expect(next.wouldDelete == 9)
            }
        }
    }

    /// A service that never stops sending: the job stops reading at its cap, closes, and handles what it read.
    @Test func aServiceThatNeverStopsSendingIsReadUpToTheCap() async throws {
        try await PushHarness.run { harness in
            try await Self.addUsers(harness, Array(1...5), registeredAgo: 2 * 86_400)
            // 5 reports, then 995 tuples of other tokens, sent again and again.
            let tuples = (1...5).map { Self.tuple($0, at: Self.dayAgo) } + (1000..<1995).map { Self.tuple($0, at: Self.dayAgo) }
            harness.simulator.state.setFeedback(tuples, fault: .endless)
            var job = try Self.job(harness, timeout: .seconds(20))
            job.maxTuples = 50_000
            let started = ContinuousClock.now
            let report = try await job.run()
            #expect(started.duration(to: .now) < .seconds(15), "stopped at the cap, not at the timeout")
            #expect(report.tuplesRead == 50_000, "50 rounds of 1,000")
            #expect(report.deletedByFeedback == 5)
            #expect(try await Self.users(harness) == "")
        }
    }

    @Test func garbageFromTheServiceDeletesNothing() async throws {
        try await PushHarness.run { harness in
            try await Self.addUsers(harness, [1], registeredAgo: 2 * 86_400)
            harness.simulator.state.setFeedback([Self.tuple(1, at: Self.dayAgo)], fault: .garbage)
            let error = await #expect(throws: FeedbackError.self) { try await Self.job(harness).run() }
            #expect(error?.description.contains("not feedback tuples") == true)
            #expect(try await Self.users(harness) == "user 1")
        }
    }

    @Test func aServiceThatNeverClosesTimesOut() async throws {
        try await PushHarness.run { harness in
            try await Self.addUsers(harness, [1], registeredAgo: 2 * 86_400)
            harness.simulator.state.setFeedback([Self.tuple(1, at: Self.dayAgo)], fault: .hang)
            let start = ContinuousClock.now
            let error = await #expect(throws: FeedbackError.self) { try await Self.job(harness, timeout: .seconds(1)).run() }
            #expect(ContinuousClock.now - start < .seconds(10))
            #expect(error?.description.contains("did not close") == true)
            #expect(try await Self.users(harness) == "user 1")
        }
    }

    @Test func anUnreachableDatabaseStopsBeforeReadingTheService() async throws {
        try await PushHarness.run { harness in
            harness.simulator.state.setFeedback([Self.tuple(1, at: Self.dayAgo)])
            let unreachable = try DatabaseURL(parsing: "postgres://u@127.0.0.1:1/none?sslmode=disable")
            let error = await #expect(throws: FeedbackError.self) {
                try await Self.job(harness, configuration: harness.configuration(url: unreachable)).run()
            }
            #expect(error?.description.contains("cannot reach the database") == true)
            #expect(harness.simulator.state.counters.feedbackConnections == 0, "Apple's list is not consumed for nothing")
        }
    }

    @Test func theExecutableExitsNonZeroWithOneLineWhenTheServiceIsUnreachableOrRefusesTheCertificate() async throws {
        try await PushHarness.run { harness in
            var environment = harness.environment(harness.configuration())
            environment["PUSHCHAT_APNS_FEEDBACK"] = "127.0.0.1:1"
            let unreachable = try Executable(name: "pushchat-feedback").run(["development"], environment: environment)
            #expect(unreachable.status == 1)
            #expect(unreachable.standardError.hasPrefix("pushchat-feedback: cannot connect to 127.0.0.1:1"))

            environment["PUSHCHAT_APNS_FEEDBACK"] = "127.0.0.1:\(harness.ports.feedback)"
            environment["PUSHCHAT_APNS_CERTIFICATE"] = TestCertificates.path("other-ck.pem")
            let refused = try Executable(name: "pushchat-feedback").run(["development"], environment: environment)
            #expect(refused.status == 1)
            #expect(refused.standardError.contains("certificate"))

            try await Self.addUsers(harness, [1], registeredAgo: 2 * 86_400)
            harness.simulator.state.setFeedback([Self.tuple(1, at: Self.dayAgo)])
            environment["PUSHCHAT_APNS_CERTIFICATE"] = TestCertificates.path("ck.pem")
            let success = try Executable(name: "pushchat-feedback").run(["development"], environment: environment)
            #expect(success.status == 0, "\(success.standardError)")
            #expect(success.standardOutput.contains("Feedback: 1 tuples read, 1 users deleted, 0 kept because re-registered"))
        }
    }

    @Test func aMetricsFileThatCannotBeWrittenFailsTheRunAndOneThatCanHoldsItsFigures() async throws {
        try await PushHarness.run { harness in
            var environment = harness.environment(harness.configuration())
            environment["PUSHCHAT_APNS_FEEDBACK"] = "127.0.0.1:\(harness.ports.feedback)"
            try await Self.addUsers(harness, [1], registeredAgo: 2 * 86_400)
            harness.simulator.state.setFeedback([Self.tuple(1, at: Self.dayAgo)])

            // A folder the job may not write (ProtectSystem=strict without ReadWritePaths= did this): exit 1, a line.
            let readOnly = NSTemporaryDirectory() + "pushchat-metrics-ro-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: readOnly, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: readOnly) }
            try FileManager.default.setAttributes([.posixPermissions: 0o555], ofItemAtPath: readOnly)
            let job = Executable(name: "pushchat-feedback")
            let failed = try job.run(["development", "--metrics-file", readOnly + "/feedback.prom"], environment: environment)
            #expect(failed.status == 1, "\(failed.standardOutput)")
            #expect(failed.standardError.contains("cannot write the metrics file \(readOnly)/feedback.prom"))
            #expect(!FileManager.default.fileExists(atPath: readOnly + "/feedback.prom"))

            let writable = NSTemporaryDirectory() + "pushchat-metrics-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: writable, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: writable) }
            ServiceUser.own(writable)
            harness.simulator.state.setFeedback([Self.tuple(1, at: Self.dayAgo)])
            let written = try job.run(["development", "--metrics-file", writable + "/feedback.prom"], environment: environment)
            #expect(written.status == 0, "\(written.standardError)")
            let figures = Scrape(try String(contentsOfFile: writable + "/feedback.prom", encoding: .utf8))
            #expect(figures.sum("pushchat_feedback_success") == 1)
            #expect(figures.sum("pushchat_feedback_tuples_read") == 1)
        }
    }
}
