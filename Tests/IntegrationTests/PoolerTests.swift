import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing

@testable import API
@testable import APNs
@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support

/// Every process through Debian's PgBouncer in transaction pooling with two server connections and no special
/// settings: `migrate` (directly, as the guide runs it) sets the timeouts as the database's defaults, the API's
/// sessions find they are pooled and run their statements unnamed, and the daemon drains through the pooler with
/// `LISTEN` on `database_listen_url`.
@Suite(.serialized, .enabled(if: PgBouncer.isInstalled, "needs Debian's pgbouncer (scripts/test.sh installs it)"))
struct PoolerTests {
    @Test func twoAPIsAndTheDaemonWorkThroughPgBouncerWithTwoServerConnections() async throws {
        try await ScratchCluster.with { cluster in
            let direct = try cluster.url(database: "pushchat")
            // The real migrate, as the service user: it makes the timeouts the database's defaults.
            let migrate = try Executable(name: "pushchat-api").run(
                ["migrate", "production"],
                environment: [
                    "PUSHCHAT_DATABASE_URL": direct.connectionString,
                    "PUSHCHAT_MIGRATIONS_DIR": TestDatabase.migrationsDirectory,
                    "PUSHCHAT_DATABASE_STATEMENT_TIMEOUT": "20s",
                    "PUSHCHAT_DATABASE_LOCK_TIMEOUT": "4s",
                    "PUSHCHAT_LOG_FILE": "-",
                ]
            )
            #expect(migrate.status == 0, "\(migrate.standardError)")
            #expect(!migrate.standardError.contains("warning"), "\(migrate.standardError)")
            try await PgBouncer.with(front: cluster, poolSize: 2) { bouncer in
                let pooled = try bouncer.url()
                // Refused as start-up parameters, so found pooled; the timeouts arrive from the database's defaults.
                let session = try await DatabaseSession.detect(url: pooled, applicationName: "pushchat-tests", logger: TestDatabase.logger)
                #expect(session == DatabaseSession(route: .pooled, statementTimeout: .seconds(20), lockTimeout: .seconds(4)))
                let directSession = try await DatabaseSession.detect(
                    url: direct,
                    applicationName: "pushchat-tests",
                    logger: TestDatabase.logger
                )
                #expect(directSession.route == .direct)
                try await Self.chatAndProviderThroughThePooler(pooled)
                try await Self.drainThroughThePooler(pooled: pooled, direct: direct)
            }
        }
    }

    /// Two API processes' worth of requests at once through two server connections: joins, messages (the prepared
    /// statements of a direct connection would be missing on the other server connection), a provider broadcast.
    static func chatAndProviderThroughThePooler(_ pooled: DatabaseURL) async throws {
        let configuration = APIHarness.configuration(url: pooled, mode: .development)
        let key = try await ProviderAPITests.createKey(pooled)
        try await APIHarness.run(configuration: configuration) { first in
            try await APIHarness.run(configuration: configuration) { second in
                let apis = [first, second]
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for n in 1...20 {
                        group.addTask {
                            let answer = try await apis[n % 2].post([
                                "cmd": "join", "udid": Device.udid(n), "token": Device.token(n), "name": "U\(n)", "code": "pooled",
                            ])
                            #expect(answer.status == .ok, "\(answer.text)")
                        }
                    }
                    try await group.waitForAll()
                }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for n in 1...40 {
                        group.addTask {
                            let answer = try await apis[n % 2].post(["cmd": "message", "udid": Device.udid(n % 20 + 1), "text": "m\(n)"])
                            #expect(answer.status == .ok, "\(answer.text)")
                        }
                    }
                    try await group.waitForAll()
                }
                let broadcast = try await ProviderAPITests.call(
                    second,
                    .post,
                    "/v1/notifications",
                    key: key,
                    #"{"to": {"room": "pooled"}, "aps": {"alert": "hi"}}"#
                )
                #expect(broadcast.status == 202)
                #expect(broadcast.json["recipients"] as? Int == 20)
                #expect(try await first.get("/readyz").status == .ok)
            }
        }
        #expect(try await TestDatabase.scalar(pooled, "SELECT count(*) FROM messages", as: Int64.self) == 40)
        #expect(try await TestDatabase.scalar(pooled, "SELECT count(*) FROM push_deliveries", as: Int64.self) == 40 * 19 + 20)
    }

    /// The daemon executable drains every row through the pooler, listening on the direct URL.
    static func drainThroughThePooler(pooled: DatabaseURL, direct: DatabaseURL) async throws {
        let simulator = try APNsSimulator(configuration: SimulatorTests.configuration(), logger: TestDatabase.logger)
        try await simulator.withRunning { ports in
            let harness = PushHarness(url: pooled, simulator: simulator, ports: ports)
            let total = Int(try await harness.count("true"))
            var environment = harness.environment(harness.configuration())
            environment["PUSHCHAT_DATABASE_LISTEN_URL"] = direct.connectionString
            environment["PUSHCHAT_POLL_INTERVAL"] = "60"  // only LISTEN can wake it for the rows queued below
            let (daemon, output) = try PushProcessTests.start(environment)
            defer { if daemon.isRunning { kill(daemon.processIdentifier, SIGKILL) } }
            try await harness.waitUntilAllSent(total, timeout: .seconds(60))
            // Queued after the drain: the NOTIFY through the pooler reaches the LISTEN on the direct connection.
            try await harness.queue(10, from: 1000)
            try await harness.waitUntilAllSent(total + 10, timeout: .seconds(20))
            daemon.terminate()
            #expect(try await PushProcessTests.waitForExit(daemon, timeout: .seconds(15)))
            let log = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(log.contains("Database session: pooled"), "\(log)")
            #expect(log.contains("LISTEN push_queue on database_listen_url"))
            #expect(!log.contains("prepared statement"))
        }
    }
}
