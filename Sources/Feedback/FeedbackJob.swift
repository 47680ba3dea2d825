import APNs
import APNsTransport
import HTTP2Client
package import Logging
package import NIOSSL
import PostgresNIO
package import Settings
import Storage
import Support

/// One run of the feedback job (the tutorial's `feedback.php`): read the feedback service, delete the users Apple
/// reported gone (unless they registered again since), handle the push daemon's invalid-token reports, summarise.
///
/// With the HTTP/2 transport there is no feedback service (Apple retired it with the binary interface): APNs answers
/// 410 per notification instead, the push daemon records those tokens, and the job handles only those reports.
package struct FeedbackJob: Sendable {
    let configuration: Configuration
    /// For the feedback service; nil: do not read it.
    let tls: NIOSSLContext?
    let timeout: Duration
    /// Delete even more users than `feedback_max_prune` allows (`--force`).
    let force: Bool
    /// The most feedback tuples one run reads (see ``FeedbackServiceClient``).
    var maxTuples = 1_000_000
    let logger: Logger

    package init(
        configuration: Configuration,
        tls: NIOSSLContext?,
        timeout: Duration = .seconds(60),
        force: Bool = false,
        logger: Logger
    ) {
        self.configuration = configuration
        self.tls = tls
        self.timeout = timeout
        self.force = force
        self.logger = logger
    }

    /// The job for `configuration`'s transport: binary reads the feedback service (with the provider certificate),
    /// HTTP/2 does not (and needs no certificate).
    package init(configuration: Configuration, timeout: Duration = .seconds(60), force: Bool = false, logger: Logger) throws {
        let tls = configuration.apns.transport == .binary ? try configuration.apns.clientTLSContext() : nil
        self.init(configuration: configuration, tls: tls, timeout: timeout, force: force, logger: logger)
    }

    package func run() async throws -> FeedbackReport {
        // The first connection checks the database is there and tells whether a pooler stands in between.
        let session: DatabaseSession
        let chosen: DatabaseURL
        do {
            let (url, logger) = (configuration.databaseURL, self.logger)
            (session, chosen) = try await withDeadline(.seconds(10)) {
                try await DatabaseSession.detectChoosing(url: url, applicationName: "pushchat-feedback", logger: logger)
            }
        } catch {
            throw FeedbackError(
                code: .database,
                reason: "cannot reach the database \(configuration.databaseURL): \(Self.describe(error)); the feedback service was not read"
            )
        }
        let client = Database.makeClient(
            url: chosen,
            route: session.route,
            applicationName: "pushchat-feedback",
            keepOpen: false,
            logger: logger
        )
        return try await withThrowingTaskGroup(of: FeedbackReport?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await process(FeedbackStore(client: client, logger: logger, chatApp: configuration.chatApp))
        }
    }

    private func process(_ store: FeedbackStore) async throws -> FeedbackReport {
        var report = FeedbackReport()
        var read = FeedbackRead()
        if let tls {
            read = try await readService(configuration.apns.feedback, tls: tls)
        } else {
            report.serviceRead = false
            logger.info("HTTP/2 transport: no feedback service to read; handling the push daemon's invalid-token reports")
        }
        report.tuplesRead = read.tuples.count
        report.truncatedBytes = read.truncatedBytes
        report.uncleanShutdown = read.uncleanShutdown
        if read.uncleanShutdown {
            logger.warning(
                "The feedback service closed the connection without TLS close_notify after \(read.tuples.count) whole tuples; processing them"
            )
        }
        if read.capped {
            logger.warning(
                "The feedback service sent more than \(read.tuples.count) tuples without closing: stopped reading there; handling those"
            )
        }
        if read.truncatedBytes > 0 {
            logger.warning("The feedback service closed in the middle of a tuple: \(read.truncatedBytes) bytes ignored")
        }
        for tuple in read.tuples {
            logger.debug("Feedback: token \(tuple.tokenHex) gone since \(tuple.timestamp)")
        }
        // The tuples are stored first, in one statement: Apple forgets what it sent, so if the database fails after
        // this, the next run finds them pending and finishes the work.
        do {
            try await store.record(read.tuples)
        } catch {
            throw FeedbackError(
                code: .database,
                reason:
                    "database error while storing \(read.tuples.count) feedback tuples (the service will not send them again): \(Self.describe(error))"
            )
        }
        let appFailures = await readAppServices(store, into: &report)
        // The limit is checked on one snapshot of the reports and exactly those are handled: reports that arrive
        // meanwhile (the daemon's 410s) wait for the next run instead of slipping past the check.
        let (reports, refused) = try await checkPruneLimit(store)
        do {
            let applied = try await store.applyInvalidTokens(reports)
            report.deletedByFeedback = applied.feedback.deleted
            report.keptByFeedback = applied.feedback.kept
            report.invalidTokensProcessed = applied.daemon.processed
            report.deletedByInvalidTokens = applied.daemon.deleted
            report.keptByInvalidTokens = applied.daemon.kept
        } catch {
            throw FeedbackError(
                code: .database,
                reason: "database error while deleting users: \(Self.describe(error)); the reports stay pending for the next run"
            )
        }
        if !appFailures.isEmpty {
            throw FeedbackError(
                code: .service,
                reason: appFailures.joined(separator: "; ") + "; the other reports were handled"
            )
        }
        if let refused {
            // The other apps' reports were handled; the run still fails, naming the apps held back.
            logger.notice(
                "Handled the reports of the apps within feedback_max_prune: \(report.deletedByFeedback + report.deletedByInvalidTokens) users deleted"
            )
            throw refused
        }
        return report
    }

    /// Refuses, per app, a run that would delete more of its users than `feedback_max_prune` allows, unless `--force`:
    /// a sudden mass of reports is a misconfiguration (a wrong environment or topic) far more often than users
    /// leaving. The reports of an app over its limit stay pending; the other apps' are handled (their reports are
    /// returned), and the run then fails naming the apps held back.
    func checkPruneLimit(_ store: FeedbackStore) async throws -> (reports: FeedbackStore.PendingReports, refused: FeedbackError?) {
        let pending: FeedbackStore.PendingReports
        do {
            pending = try await store.pendingReports()
        } catch {
            throw FeedbackError(code: .database, reason: "database error while counting deletions: \(Self.describe(error))")
        }
        var overApps: Set<String> = []
        var lines: [String] = []
        for (app, counts) in pending.byApp.sorted(by: { $0.key < $1.key }) {
            let limit = configuration.feedbackMaxPrune.limit(usersWithToken: counts.usersWithToken)
            guard counts.wouldDelete > limit else { continue }
            let summary =
                "the reports would delete \(counts.wouldDelete) of \(counts.usersWithToken) users with a token"
                + (pending.byApp.count > 1 || app != App.defaultName ? " of app \(app)" : "")
            if force {
                logger.warning("\(summary), more than feedback_max_prune (\(configuration.feedbackMaxPrune)); deleting them (--force)")
            } else {
                overApps.insert(app)
                lines.append("\(summary), more than feedback_max_prune (\(configuration.feedbackMaxPrune) = \(limit))")
            }
        }
        guard !overApps.isEmpty else { return (pending, nil) }
        let refused = FeedbackError(
            code: .tooManyDeletions,
            reason:
                "\(lines.joined(separator: "; ")); nothing deleted there, the reports stay pending. Check the APNs environment and "
                + "topic; if Apple really reported them, run pushchat-feedback --force"
        )
        let within = Set(pending.byApp.keys).subtracting(overApps)
        if within.isEmpty { throw refused }
        return (pending.only(within), refused)
    }

    /// Reads one feedback service to its end (or its cap).
    func readService(_ endpoint: Endpoint, tls: NIOSSLContext) async throws -> FeedbackRead {
        let service = FeedbackServiceClient(
            connector: BinaryConnector(endpoint: endpoint, tls: tls, timeout: .seconds(10)),
            timeout: timeout,
            maxTuples: maxTuples
        )
        logger.info("Connecting to \(endpoint)")
        do {
            return try await service.readAll()
        } catch let error as FeedbackError {
            throw error
        } catch {
            throw FeedbackError(code: .service, reason: GatewayError.describe(error))
        }
    }

    /// The feedback services of the other apps on the binary interface (several apps on one server), each with the
    /// app's certificate and environment: their tuples are stored as that app's reports. An app whose service cannot
    /// be read is reported (the run fails, naming it) and the others go on. Returns those failures.
    func readAppServices(_ store: FeedbackStore, into report: inout FeedbackReport) async -> [String] {
        let apps: [App]
        do {
            apps = try await store.apps().filter {
                $0.name != App.defaultName && $0.disabledAt == nil && $0.settings?.transport == .binary
            }
        } catch {
            return ["cannot read the apps: \(Self.describe(error))"]
        }
        var failures: [String] = []
        for app in apps {
            guard let settings = app.settings else { continue }
            do {
                let apns = try configuration.apns.forApp(settings)
                let read = try await readService(apns.feedback, tls: try apns.clientTLSContext())
                try await store.record(read.tuples, app: app.name)
                report.tuplesRead += read.tuples.count
                logger.info("App \(app.name): \(read.tuples.count) feedback tuples")
            } catch {
                let reason = (error as? FeedbackError)?.reason ?? String(describing: error)
                logger.error("App \(app.name): cannot read its feedback service: \(reason); its tuples wait for the next run")
                failures.append("app \(app.name): cannot read its feedback service: \(reason)")
            }
        }
        return failures
    }

    static func describe(_ error: any Error) -> String {
        error is DeadlineExceeded ? "no answer within 10 s" : DatabaseError.describe(error)
    }
}
