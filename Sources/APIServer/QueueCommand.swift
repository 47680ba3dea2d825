import API
import APNs
import ArgumentParser
import Foundation
import Logging
import Observability
import PostgresNIO
import Settings
import Storage
import Support

/// `pushchat-api queue stats|retry-failed|prune`: queue administration for operators and cron.
struct QueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue",
        abstract: "Inspect and maintain push_queue.",
        subcommands: [Stats.self, RetryFailed.self, Prune.self]
    )

    /// Runs `body` with one database connection, reporting errors as one line.
    static func withAdmin(_ options: ProcessOptions, program: String, _ body: (QueueAdmin) async throws -> Void) async throws {
        try await withConnection(options, program: program) { connection, logger in
            try await body(QueueAdmin(connection: connection, logger: logger))
        }
    }

    /// Runs `body` while holding the job lock named `job` (``JobLock``); false, without running it, when another run
    /// holds it. Errors reaching the database become one line naming the job and a non-zero exit.
    static func withJobLock(_ options: ProcessOptions, job: String, _ body: () async throws -> Void) async throws -> Bool {
        var ran = false
        try await ProcessFailure.report(program: job) {
            let configuration = try options.configuration()
            var logger = Logger(label: "pushchat-api")
            logger.logLevel = .error
            ran =
                try await JobLock.withLock(job, url: configuration.databaseURL, applicationName: "pushchat-admin", logger: logger) {
                    try await body()
                } != nil
        }
        return ran
    }

    /// One database connection for an operator's command: errors (the configuration's, the database's) become one
    /// line naming `program` and a non-zero exit.
    static func withConnection(
        _ options: ProcessOptions,
        program: String,
        role: RoleOption? = nil,
        _ body: (PostgresConnection, Logger) async throws -> Void
    ) async throws {
        try await ProcessFailure.report(program: program) {
            let configuration = try options.configuration()
            var logger = Logger(label: "pushchat-api")
            logger.logLevel = .error
            try await Database.withConnection(url: configuration.databaseURL, applicationName: "pushchat-admin", logger: logger) {
                connection in
                do {
                    try await role?.apply(to: connection, logger: logger)
                    try await body(connection, logger)
                } catch let error as any PushChatError {
                    throw error
                } catch {
                    throw DatabaseError(context: program, underlying: error)
                }
            }
        }
    }

    struct Stats: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pending, in flight, oldest pending, sent in the last hour, failed by reason."
        )
        @OptionGroup var options: ProcessOptions

        func run() async throws {
            try await QueueCommand.withAdmin(options, program: "pushchat-api queue stats") { admin in
                let stats = try await admin.stats()
                let oldest = stats.oldestPending.map { "\($0.formatted(.iso8601)) (\(Int(-$0.timeIntervalSinceNow)) s ago)" } ?? "-"
                print("pending:         \(stats.pending) (\(stats.inFlight) in flight)")
                print("oldest pending:  \(oldest)")
                print("sent last hour:  \(stats.sentLastHour)")
                print("failed:          \(stats.failedByReason.reduce(0) { $0 + $1.count })")
                for failure in stats.failedByReason {
                    print("  \(failure.count)\tstatus \(failure.status)\t\(failure.reason)")
                }
            }
        }
    }

    struct RetryFailed: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "retry-failed",
            abstract: "Put failed notifications back in the queue."
        )
        @OptionGroup var options: ProcessOptions
        @Option(help: "Only rows whose last_status is this (e.g. 8, 1, invalid).")
        var reason: String?

        func run() async throws {
            try await QueueCommand.withAdmin(options, program: "pushchat-api queue retry-failed") { admin in
                print("\(try await admin.retryFailed(status: reason)) notifications back in the queue")
            }
        }
    }

    struct Prune: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Delete sent and failed rows older than --older-than (moving those left in push_queue to push_history), and old messages, users without a token and handled invalid-token reports (retention_*), and webhook POSTs past webhook_retry_window, in batches."
        )
        @OptionGroup var options: ProcessOptions
        @Option(name: .customLong("older-than"), help: "Retention, e.g. 7d, 12h, 3600.")
        var olderThan: String
        @Option(
            name: .customLong("metrics-file"),
            help: "Also write this run's figures to this file in the Prometheus text format (for a textfile collector)."
        )
        var metricsFile: String?

        func validate() throws {
            guard let age = Configuration.parseDuration(olderThan), age > .zero else {
                throw ValidationError("--older-than: expected a positive duration such as 7d, 12h or 3600, got '\(olderThan)'")
            }
        }

        func run() async throws {
            let age = Configuration.parseDuration(olderThan) ?? .seconds(7 * 86_400)
            let configuration = try options.configuration()
            let retention = configuration.retention
            var deleted = 0
            let start = ContinuousClock.now
            do {
                let ran = try await QueueCommand.withJobLock(options, job: "pushchat-api queue prune") {
                    try await QueueCommand.withAdmin(options, program: "pushchat-api queue prune") { admin in
                        // The outbox first: a POST past the window no longer keeps the push_history rows it names.
                        let window = configuration.webhooks.retryWindow
                        let posts = try await admin.pruneWebhookOutbox(window: window)
                        let rows = try await admin.prune(olderThan: age)
                        print("\(rows) rows older than \(olderThan) deleted")
                        let moved = try await admin.moveStampedRows()
                        if moved > 0 { print("\(moved) rows sent or failed before they moved on their own moved to push_history") }
                        let (notifications, keys) = try await admin.pruneNotifications(olderThan: age)
                        print(
                            "\(notifications) provider notifications older than \(olderThan) and \(keys) idempotency keys past 24 h deleted"
                        )
                        let pruned = try await admin.pruneRetention(retention)
                        print(
                            "retention: \(pruned.messages) messages older than \(retention.messages.days), "
                                + "\(pruned.tokenlessUsers) users without a token after \(retention.tokenlessUsers.days), "
                                + "\(pruned.invalidTokens) handled invalid-token reports older than \(retention.invalidTokens.days) deleted"
                        )
                        print("\(posts) webhook POSTs past the retry window (\(window.days)) deleted")
                        let subscriptions = try await admin.pruneWebSubscriptions()
                        print("\(subscriptions) browser subscriptions no device or chat user names deleted")
                        deleted =
                            rows + notifications + keys + pruned.messages + pruned.tokenlessUsers + pruned.invalidTokens + posts
                            + subscriptions
                    }
                }
                guard ran else {
                    print("pushchat-api queue prune: another run holds the job lock (on this or another machine): nothing to do")
                    return
                }
            } catch {
                try? writeMetrics(success: false, deleted: 0, since: start)
                throw error
            }
            // A file that cannot be written fails the run: otherwise no alert could notice that the figures stopped.
            do {
                try writeMetrics(success: true, deleted: deleted, since: start)
            } catch {
                ProcessFailure.printError(
                    "pushchat-api queue prune",
                    "cannot write the metrics file \(metricsFile ?? ""): \(error.localizedDescription)"
                )
                throw ExitCode(1)
            }
        }

        /// `pushchat_prune_success` (1 or 0), `…_rows_deleted` (all kinds), `…_duration_seconds` and
        /// `…_last_run_timestamp_seconds`, when `--metrics-file` was given; written after a failed run too, so the
        /// alert on it fires.
        private func writeMetrics(success: Bool, deleted: Int, since start: ContinuousClock.Instant) throws {
            guard let metricsFile else { return }
            let figures: [(name: String, value: Double)] = [
                ("pushchat.prune.success", success ? 1 : 0),
                ("pushchat.prune.rows_deleted", Double(deleted)),
                ("pushchat.prune.duration_seconds", start.duration(to: .now).seconds),
                ("pushchat.prune.last_run_timestamp_seconds", Date().timeIntervalSince1970.rounded()),
            ]
            try TextfileMetrics.write(TextfileMetrics.exposition(figures), to: metricsFile)
        }
    }
}

/// `pushchat-api push TOKEN MESSAGE`: queue a test notification, as the tutorial's `push_test.php` did.
struct TestPushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "push", abstract: "Queue a test notification for a device token.")
    @Argument(help: "The device token: 64 hex digits.")
    var token: String
    @Argument(help: "The alert text.")
    var message: String
    @OptionGroup var options: ProcessOptions

    func validate() throws {
        guard token.utf8.count == 64, DeviceToken.bytes(hex: token) != nil else {
            throw ValidationError("TOKEN: expected 64 hex digits")
        }
        guard !message.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("MESSAGE: must not be empty") }
    }

    func run() async throws {
        try await QueueCommand.withAdmin(options, program: "pushchat-api push") { admin in
            let id = try await admin.queueTest(token: token.lowercased(), message: message)
            print("queued message \(id)")
        }
    }
}

extension Duration {
    /// `30d`, `12h` or `90s`, for the prune job's line; `forever` for zero.
    var days: String {
        let seconds = Int64(self.seconds)
        if seconds == 0 { return "forever (kept)" }
        if seconds % 86_400 == 0 { return "\(seconds / 86_400)d" }
        if seconds % 3600 == 0 { return "\(seconds / 3600)h" }
        return "\(seconds)s"
    }
}
