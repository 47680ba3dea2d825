import Foundation
import PostgresNIO
import Testing

@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support

/// Every machine can schedule the feedback and prune jobs: a run that finds another one under way (the job's
/// advisory lock held) exits 0 with one line and changes nothing; once the lock is free, the next run does the work.
@Suite struct JobLockTests {
    /// Runs `body` while a session of the test's holds `job`'s lock, as a run on another machine would.
    static func whileHeld(_ job: String, url: DatabaseURL, _ body: () async throws -> Void) async throws {
        try await TestDatabase.withConnection(url) { connection in
            try await connection.query("BEGIN", logger: TestDatabase.logger)
            try await connection.query("SELECT pg_advisory_xact_lock(\(JobLock.space), hashtext(\(job)))", logger: TestDatabase.logger)
            try await body()
            try await connection.query("ROLLBACK", logger: TestDatabase.logger)
        }
    }

    @Test func aFeedbackRunWhileAnotherHoldsTheLockDoesNothing() async throws {
        try await PushHarness.run { harness in
            try await FeedbackTests.addUsers(harness, [1, 2], registeredAgo: 2 * 86_400)
            harness.simulator.state.setFeedback([FeedbackTests.tuple(1, at: FeedbackTests.dayAgo)])
            var environment = harness.environment(harness.configuration())
            environment["PUSHCHAT_APNS_FEEDBACK"] = "127.0.0.1:\(harness.ports.feedback)"
            let job = Executable(name: "pushchat-feedback")
            try await Self.whileHeld("pushchat-feedback", url: harness.url) {
                let skipped = try job.run(["development"], environment: environment)
                #expect(skipped.status == 0, "\(skipped.standardError)")
                #expect(skipped.standardOutput.contains("another run holds the job lock"), "\(skipped.standardOutput)")
                #expect(!skipped.standardOutput.contains("Feedback:"), "the service is not read: \(skipped.standardOutput)")
                #expect(try await FeedbackTests.users(harness) == "user 1,user 2")
            }
            let ran = try job.run(["development"], environment: environment)
            #expect(ran.status == 0, "\(ran.standardError)")
            #expect(ran.standardOutput.contains("Feedback: 1 tuples read, 1 users deleted"), "\(ran.standardOutput)")
            #expect(try await FeedbackTests.users(harness) == "user 2")
        }
    }

    @Test func aPruneRunWhileAnotherHoldsTheLockDoesNothing() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    "INSERT INTO messages (secret_code, sender_udid, sender_name, text, created_at) VALUES ('r', 'a', 'Ann', 'old', now() - interval '40 days')",
                    logger: TestDatabase.logger
                )
            }
            let prune = {
                try Executable(name: "pushchat-api").run(
                    ["queue", "prune", "--older-than", "7d", "development"],
                    environment: ["PUSHCHAT_DATABASE_URL": url.connectionString, "PUSHCHAT_LOG_FILE": "-"]
                )
            }
            try await Self.whileHeld("pushchat-api queue prune", url: url) {
                let skipped = try prune()
                #expect(skipped.status == 0, "\(skipped.standardError)")
                #expect(skipped.standardOutput.contains("another run holds the job lock"), "\(skipped.standardOutput)")
                #expect(try await TestDatabase.scalar(url, "SELECT count(*) FROM messages", as: Int64.self) == 1)
            }
            let ran = try prune()
            #expect(ran.status == 0, "\(ran.standardError)")
            #expect(ran.standardOutput.contains("retention: 1 messages"), "\(ran.standardOutput)")
            #expect(try await TestDatabase.scalar(url, "SELECT count(*) FROM messages", as: Int64.self) == 0)
        }
    }
}
