package import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO
import ServiceLifecycle
package import Settings
import Support

/// A long-running process's database: the pool, how its sessions reach PostgreSQL (``DatabaseSession``), and a probe
/// that knows whether the database answers (``DatabaseHealth``). Run it (it is a `Service`) for as long as it is used.
///
/// It finds the session's route on its first connection, then opens the pool and probes once a second on a connection
/// of its own. When the database goes away the probe says so at once: requests are refused instead of each waiting out
/// a deadline, and those waiting for a connection are stopped. When it answers again a fresh pool replaces the old one
/// (whose reconnection backoff may have grown to a minute) and requests are served again.
///
/// A request's work has two phases. Waiting for a connection, nothing has reached the server: that wait ends when the
/// database goes down or after `leaseTimeout`, and the error says nothing was done. Once the statement is sent, the
/// server decides: `statement_timeout` (below the request's own limit) cancels it there, so an error means it did not
/// commit. Only if the server does not answer at all by `statement_timeout` + 5 s does the request stop waiting, and its
/// error says the outcome is unknown.
package final class DatabaseClient: Service, Sendable {
    let url: DatabaseURL
    let applicationName: String
    let keepOpen: Bool
    let leaseTimeout: Duration
    let probeInterval: Duration
    package let health: DatabaseHealth
    let logger: Logger
    let current = NIOLockedValueBox<(pool: PostgresClient, session: DatabaseSession, host: DatabaseURL.Host?)?>(nil)

    package init(
        url: DatabaseURL,
        applicationName: String,
        keepOpen: Bool = true,
        leaseTimeout: Duration = .seconds(10),
        probeInterval: Duration = .seconds(1),
        logger: Logger
    ) {
        self.url = url
        self.applicationName = applicationName
        self.keepOpen = keepOpen
        self.leaseTimeout = leaseTimeout
        self.probeInterval = probeInterval
        self.health = DatabaseHealth(logger: logger)
        self.logger = logger
    }

    /// How the sessions reach PostgreSQL; nil until the first connection.
    package var session: DatabaseSession? { current.withLockedValue { $0?.session } }

    /// Waits until the first connection has told the route and the pool exists (the push daemon waits here at start).
    package func waitForPool() async throws {
        while current.withLockedValue({ $0 == nil }) {
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    package func run() async throws {
        await cancelWhenGracefulShutdown {
            await self.runGenerations()
        }
    }

    /// One pool per stretch of the database answering: a pool, its probe, and on recovery a new one.
    ///
    /// The new pool takes over before the old one has finished shutting down: a statement still waiting on the old
    /// pool must never hold up the switch (the daemon would wait on a pool that is closing, and it on the statement).
    private func runGenerations() async {
        await withDiscardingTaskGroup { pools in
            var backoff = Backoff(initial: .milliseconds(200), maximum: .seconds(2))
            var previous: Task<Void, Never>?
            while !Task.isCancelled {
                let session: DatabaseSession
                let chosen: DatabaseURL
                do {
                    // Bounded as a whole: a step that never returns (a connection's end not reported, a close that
                    // waits) must not keep the process from ever settling (`/readyz` and every request wait for it).
                    (session, chosen) = try await withDeadline(detectLimit) { [url, applicationName, logger] in
                        try await DatabaseSession.detectChoosing(url: url, applicationName: applicationName, logger: logger)
                    }
                } catch {
                    if Task.isCancelled { break }
                    health.failed(Self.describe(error))
                    try? await Task.sleep(for: backoff.next())
                    continue
                }
                backoff.reset()
                announce(session, on: chosen)
                let pool = Database.makeClient(
                    url: chosen,
                    route: session.route,
                    applicationName: applicationName,
                    keepOpen: keepOpen,
                    logger: logger
                )
                // Its own task, so that it can be stopped alone; the group waits for it (and cancels it) at shutdown.
                let running = Task { await pool.run() }
                pools.addTask {
                    await withTaskCancellationHandler {
                        await running.value
                    } onCancel: {
                        running.cancel()
                    }
                }
                current.withLockedValue { $0 = (pool, session, chosen.hosts.first) }
                previous?.cancel()
                previous = running
                health.probeSucceeded()
                // The probe returns when the database came back after an outage (this pool's backoff is spent), or,
                // with several hosts, when the chosen one stopped answering or stopped being what the URL asks.
                await probe(session: session, on: chosen)
            }
            previous?.cancel()
        }
    }

    /// How long finding the session's host and route may take: for each host, its connection (`connect_timeout`) and
    /// a query, twice (directly, then as through a pooler).
    var detectLimit: Duration { ((url.connectTimeout ?? .seconds(5)) + .seconds(5)) * (2 * max(1, url.hosts.count)) }

    private func announce(_ session: DatabaseSession, on chosen: DatabaseURL) {
        let previous = current.withLockedValue { $0.map { ($0.session, $0.host) } }
        if url.choosesHost, previous?.1 != chosen.hosts.first {
            logger.notice(
                "Database host: \(chosen.hosts.first.map { "\($0)" } ?? chosen.host) (\(url.targetSessionAttributes.rawValue), of \(url.hosts.count))",
                metadata: ["db.url": "\(url)"]
            )
        }
        guard previous?.0 != session else { return }
        logger.info("Database session: \(session)", metadata: ["db.url": "\(url)", "db.route": "\(session.route.rawValue)"])
        if session.isPooled {
            logger.notice(
                "Through a connection pooler: the timeouts are the database's defaults (set by migrate), statements run unnamed"
            )
            if session.statementTimeout == .zero {
                logger.warning(
                    "No statement_timeout reaches this session through the pooler: a request cut short may still commit; run `pushchat-api migrate` (it sets the database's defaults)"
                )
            }
        }
    }

    /// Probes once per `probeInterval` on a connection of its own until cancelled or until the database answers
    /// again after having been down.
    private func probe(session: DatabaseSession, on chosen: DatabaseURL) async {
        var connection: PostgresConnection?
        var wasDown = false
        let wanted = url.targetSessionAttributes
        probing: while !Task.isCancelled {
            do {
                let live: PostgresConnection
                if let connection, !connection.isClosed {
                    live = connection
                } else {
                    if let stale = connection { await Self.close(stale) }
                    connection = nil
                    live = try await Database.connect(
                        url: chosen,
                        route: session.route,
                        applicationName: applicationName + "-probe",
                        connectTimeout: probeInterval + .milliseconds(500),
                        logger: logger
                    )
                    connection = live
                }
                let fits = try await withDeadline(probeInterval + .milliseconds(500)) { [logger] in
                    if wanted == .any || wanted == .preferStandby {
                        try await live.query("SELECT 1", logger: logger)
                        return true
                    }
                    return try await Database.session(live, is: wanted, logger: logger)
                }
                guard fits else {
                    throw DatabaseError(
                        code: .unavailable,
                        context: "probing \(chosen)",
                        reason: "\(chosen.hosts.first.map { "\($0)" } ?? chosen.host) is no longer \(wanted.rawValue)"
                    )
                }
                if wasDown { break probing }
                health.probeSucceeded()
            } catch {
                if Task.isCancelled { break probing }
                wasDown = true
                health.failed(Self.describe(error))
                if let stale = connection { await Self.close(stale) }
                connection = nil
                // Several hosts: look for the one that fits now (a standby promoted) rather than wait for this one.
                if url.choosesHost { break probing }
            }
            try? await Task.sleep(for: probeInterval)
        }
        // Closed and waited for (postgres-nio asserts that a connection is closed before it goes).
        if let connection { await Self.close(connection) }
    }

    /// Closes a connection, waiting at most a second: closing says goodbye to the server, and a server that stopped
    /// answering would hold the probe here.
    static func close(_ connection: PostgresConnection) async {
        _ = try? await withDeadline(.seconds(1)) { try await connection.close() }
    }

    static func describe(_ error: any Error) -> String {
        if error is DeadlineExceeded { return "no answer within the probe's limit" }
        if let error = error as? DatabaseError { return error.reason }
        return DatabaseError.describe(error)
    }
}
