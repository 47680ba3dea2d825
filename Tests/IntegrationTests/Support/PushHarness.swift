import APNsTransport
import Foundation
import Logging
import NIOSSL
import PostgresNIO
import ServiceLifecycle
import Testing

@testable import API
@testable import APNs
@testable import Observability
@testable import Push
@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support

/// A fresh database, an in-process APNs simulator and push daemons pointed at it.
struct PushHarness: Sendable {
    /// The owner's URL, for the tests' own queries.
    let url: DatabaseURL
    let simulator: APNsSimulator
    let ports: APNsSimulator.Ports
    /// What the daemons connect as: the services' role on a fresh test database (``TestDatabase/service(_:)``); the
    /// owner where a test made the database itself (a scratch cluster, a pooler, an older schema).
    var daemonURL: DatabaseURL

    init(url: DatabaseURL, simulator: APNsSimulator, ports: APNsSimulator.Ports, daemonURL: DatabaseURL? = nil) {
        self.url = url
        self.simulator = simulator
        self.ports = ports
        self.daemonURL = daemonURL ?? url
    }

    /// Runs `body` with a fresh database and a running simulator.
    static func run(
        simulator simulatorConfiguration: SimulatorConfiguration = SimulatorTests.configuration(),
        _ body: @Sendable (PushHarness) async throws -> Void
    ) async throws {
        try await TestDatabase.withFreshDatabase { url in
            let simulator = try APNsSimulator(configuration: simulatorConfiguration, logger: TestDatabase.logger)
            try await simulator.withRunning { ports in
                try await body(PushHarness(url: url, simulator: simulator, ports: ports, daemonURL: TestDatabase.service(url)))
            }
        }
    }

    /// The daemon's configuration for this harness: quick settle and lease so tests finish fast.
    func configuration(
        certificate: String = "ck.pem",
        passphrase: String? = TestCertificates.passphrase,
        url: DatabaseURL? = nil
    ) -> Configuration {
        var configuration = Configuration(mode: .development, databaseURL: url ?? daemonURL)
        configuration.apns.gateway = Endpoint(host: "127.0.0.1", port: ports.gateway)
        configuration.apns.feedback = Endpoint(host: "127.0.0.1", port: ports.feedback)
        configuration.apns.certificate = TestCertificates.path(certificate)
        configuration.apns.passphrase = passphrase.map(Secret.init)
        configuration.apns.caFile = TestCertificates.path("ca.pem")
        configuration.pollInterval = .seconds(1)
        configuration.push.settle = .milliseconds(500)
        configuration.push.lease = .seconds(3)
        configuration.push.batchSize = 200
        configuration.push.statusPort = 0
        // Test databases hold a handful of users, so the default 10% would refuse most test deletions; the limit
        // has its own test.
        configuration.feedbackMaxPrune = .share(1)
        return configuration
    }

    static let keyID = "DEVKEY0001"
    static let teamID = "DEVTEAM001"
    static let topic = "com.example.PushChat"

    /// A daemon speaking HTTP/2 to the simulator: token authentication with the development key (or `keyFile`), or
    /// the client certificate when `certificate` is true.
    func http2(keyFile: String = "AuthKey_DEVKEY0001.p8", certificate: Bool = false) throws -> (Configuration, HTTP2Authentication) {
        var configuration = configuration()
        configuration.apns.transport = .http2
        configuration.apns.host = Endpoint(host: "127.0.0.1", port: ports.http2)
        configuration.apns.topic = Self.topic
        configuration.push.requestTimeout = .seconds(2)
        if !certificate {
            configuration.apns.keyFile = TestCertificates.path(keyFile)
            configuration.apns.keyID = Self.keyID
            configuration.apns.teamID = Self.teamID
        }
        return (configuration, try configuration.apns.http2Authentication())
    }

    /// Runs one HTTP/2 daemon while `body` runs.
    func withHTTP2Daemon<T: Sendable>(
        _ setup: (Configuration, HTTP2Authentication),
        _ body: @Sendable () async throws -> T
    ) async throws -> T {
        let (configuration, _) = setup
        let services = try PushService.services(
            configuration: configuration,
            logger: TestDatabase.logger,
            instance: "test-http2-daemon"
        )
        return try await withServices(services, body)
    }

    /// Environment variables that give the `pushchat-push` executable the same configuration.
    func environment(_ configuration: Configuration) -> [String: String] {
        var environment = [
            "PUSHCHAT_DATABASE_URL": configuration.databaseURL.connectionString,
            "PUSHCHAT_APNS_GATEWAY": configuration.apns.gateway.description,
            "PUSHCHAT_APNS_CERTIFICATE": configuration.apns.certificate ?? "",
            "PUSHCHAT_APNS_PASSPHRASE": configuration.apns.passphrase?.value ?? "",
            "PUSHCHAT_APNS_CA_FILE": configuration.apns.caFile ?? "",
            "PUSHCHAT_POLL_INTERVAL": "1",
            "PUSHCHAT_PUSH_SETTLE": "0.5",
            "PUSHCHAT_PUSH_LEASE": "3",
            "PUSHCHAT_PUSH_BATCH_SIZE": "200",
            "PUSHCHAT_PUSH_STATUS_PORT": "0",
            "PUSHCHAT_LOG_FILE": "-",
            "PUSHCHAT_LOG_LEVEL": "info",
            "PUSHCHAT_FEEDBACK_MAX_PRUNE": "100%",
        ]
        if configuration.apns.transport == .http2 {
            environment["PUSHCHAT_APNS_TRANSPORT"] = "http2"
            environment["PUSHCHAT_APNS_HOST"] = configuration.apns.host.description
            environment["PUSHCHAT_APNS_TOPIC"] = configuration.apns.topic ?? ""
            environment["PUSHCHAT_APNS_KEY_FILE"] = configuration.apns.keyFile ?? ""
            environment["PUSHCHAT_APNS_KEY_ID"] = configuration.apns.keyID ?? ""
            environment["PUSHCHAT_APNS_TEAM_ID"] = configuration.apns.teamID ?? ""
            environment["PUSHCHAT_PUSH_REQUEST_TIMEOUT"] = "\(configuration.push.requestTimeout.components.seconds)"
        }
        return environment
    }

    /// Runs push daemons in this process while `body` runs, then shuts them down gracefully.
    func withDaemons<T: Sendable>(
        _ configurations: [Configuration],
        _ body: @Sendable () async throws -> T
    ) async throws -> T {
        var services: [any Service] = []
        for (index, configuration) in configurations.enumerated() {
            services += try PushService.services(
                configuration: configuration,
                logger: TestDatabase.logger,
                instance: "test-daemon-\(index + 1)"
            )
        }
        return try await withServices(services, body)
    }

    /// Runs one daemon and gives `body` the port of its status listener (`/healthz`, `/readyz`, `/metrics`).
    func withDaemonStatus<T: Sendable>(
        _ configuration: Configuration? = nil,
        _ body: @Sendable (_ statusPort: Int) async throws -> T
    ) async throws -> T {
        let configuration = configuration ?? self.configuration()
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let services = try PushService.services(
            configuration: configuration,
            logger: TestDatabase.logger,
            instance: "test-daemon-status",
            onStatusServerRunning: { port in continuation.yield(port) }
        )
        return try await withServices(services) {
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            return try await body(port)
        }
    }

    func withServices<T: Sendable>(_ services: [any Service], _ body: @Sendable () async throws -> T) async throws -> T {
        let group = ServiceGroup(configuration: .init(services: services, logger: TestDatabase.logger))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            do {
                let result = try await body()
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                return result
            } catch {
                await group.triggerGracefulShutdown()
                try? await tasks.waitForAll()
                throw error
            }
        }
    }

    func withDaemon<T: Sendable>(_ configuration: Configuration? = nil, _ body: @Sendable () async throws -> T) async throws -> T {
        try await withDaemons([configuration ?? self.configuration()], body)
    }

    /// Queues `count` notifications to distinct tokens (token n = hex of n), returns their message ids.
    @discardableResult
    func queue(
        _ count: Int,
        from start: Int = 1,
        payload: String = #"{"aps":{"alert":"Ann: hi","sound":"default"}}"#
    ) async throws -> [Int64] {
        try await TestDatabase.withConnection(url) { connection in
            let rows = try await connection.query(
                """
                INSERT INTO push_queue (device_token, payload)
                SELECT lpad(to_hex(g), 64, '0'), \(payload) FROM generate_series(\(start), \(start + count - 1)) g
                RETURNING message_id
                """,
                logger: TestDatabase.logger
            )
            var ids: [Int64] = []
            for try await id in rows.decode(Int64.self) { ids.append(id) }
            return ids.sorted()
        }
    }

    static func token(_ n: Int) -> String { String(format: "%064x", n) }

    func count(_ condition: String) async throws -> Int64 {
        try await TestDatabase.scalar(
            url,
            PostgresQuery(unsafeSQL: "SELECT count(*) FROM push_deliveries WHERE \(condition)"),
            as: Int64.self
        )
    }

    /// How many rows are sent and how many failed.
    func sentAndFailed() async throws -> [Int64] {
        [try await count("time_sent IS NOT NULL"), try await count("time_failed IS NOT NULL")]
    }

    /// Waits (polling, bounded) until `condition` holds; records an issue if it never does.
    func waitUntil(
        timeout: Duration = .seconds(30),
        _ what: String,
        _ condition: @Sendable () async throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("timed out after \(timeout) waiting until \(what)")
        throw CancellationError()
    }

    func waitUntilAllSent(_ total: Int, timeout: Duration = .seconds(30)) async throws {
        try await waitUntil(timeout: timeout, "\(total) rows are sent") { try await count("time_sent IS NOT NULL") == total }
    }

    /// Accepted identifiers by how often the simulator saw each.
    var acceptedCounts: [UInt32: Int] {
        simulator.state.accepted.reduce(into: [:]) { $0[$1.identifier, default: 0] += 1 }
    }
}
