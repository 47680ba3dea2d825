import APNs
import FCM
import Foundation
import Logging
import Observability
import PostgresNIO
import Push
import Settings
import Simulator
import Storage
import Support
import WebPush

/// One benchmark run: a fresh database, the simulator in this process (or, in the field, a process of its own), the
/// daemon binaries as child processes.
package final class Bench: Sendable {
    package struct Figure: Sendable {
        let name: String
        let value: String
        let target: String
        let met: Bool?
    }

    let url: DatabaseURL
    let server: DatabaseURL
    let simulator: APNsSimulator
    let ports: APNsSimulator.Ports
    let environment: [String: String]
    /// What a daemon needs to send Android rows through the simulator's FCM (the FCM figures add it).
    let fcmEnvironment: [String: String]
    /// What a daemon needs to reach the simulator's browsers (the Web Push figures add it), and the key it signs with.
    let webEnvironment: [String: String]
    let vapidKey: VAPIDKey
    /// `--env`: applied last, over each figure's own settings.
    let overrides: [String: String]
    let binDir: String
    /// The field's way of running (issue 43): the simulator's process and the service user, when asked for.
    let field: FieldProcesses
    /// Whether the schema has `push_history` (a release before it keeps sent rows in `push_queue`).
    let hasHistory: Bool
    let logger: Logger
    let stop: @Sendable () async -> Void

    private init(
        url: DatabaseURL,
        server: DatabaseURL,
        simulator: APNsSimulator,
        ports: APNsSimulator.Ports,
        environment: [String: String],
        fcmEnvironment: [String: String],
        webEnvironment: [String: String],
        vapidKey: VAPIDKey,
        overrides: [String: String],
        binDir: String,
        field: FieldProcesses,
        hasHistory: Bool,
        logger: Logger,
        stop: @escaping @Sendable () async -> Void
    ) {
        self.field = field
        self.hasHistory = hasHistory
        self.url = url
        self.server = server
        self.simulator = simulator
        self.ports = ports
        self.environment = environment
        self.fcmEnvironment = fcmEnvironment
        self.webEnvironment = webEnvironment
        self.vapidKey = vapidKey
        self.overrides = overrides
        self.binDir = binDir
        self.logger = logger
        self.stop = stop
    }

    static func prepare(
        server: DatabaseURL,
        certs: String,
        passphrase: String,
        binDir: String,
        overrides: [String: String] = [:],
        rtt: Duration = .zero,
        migrations: String = "migrations",
        field: FieldPlan = FieldPlan(),
        logger: Logger
    ) async throws -> Bench {
        let (developmentKeyID, developmentTeamID, developmentTopic) = (Self.developmentKeyID, Self.developmentTeamID, Self.developmentTopic)
        let name = "pushchat_bench_\(getpid())"
        try await execute(server, "DROP DATABASE IF EXISTS \(name)", logger: logger)
        try await execute(server, "CREATE DATABASE \(name)", logger: logger)
        // The bench's own statements run without the daemons' 30 s bound: setting up a million devices at once took
        // longer than that on a machine whose disk was cold.
        var url = server.with(database: name)
        url.statementTimeout = .zero
        let hasHistory = try await Database.withConnection(url: url, applicationName: "pushchat-bench", logger: logger) { connection in
            try await Migrator(connection: connection, migrations: try Migration.load(from: migrations), logger: logger).migrate()
            for try await exists in try await connection.query("SELECT to_regclass('push_history') IS NOT NULL", logger: logger)
                .decode(Bool.self)
            {
                return exists
            }
            return false
        }
        var configuration = SimulatorConfiguration(certificateDirectory: certs)
        configuration.gatewayPort = 0
        configuration.feedbackPort = 0
        configuration.http2Port = 0
        configuration.http2.verifiers = [
            try ProviderTokenVerifier(
                keyID: developmentKeyID,
                teamID: developmentTeamID,
                publicKeyPEM: String(contentsOfFile: certs + "/AuthKey_\(developmentKeyID).pub.pem", encoding: .utf8)
            )
        ]
        configuration.http2.topics = [developmentTopic, Self.betaTopic]
        // Google's side on a port known in advance: the development service account's token URI names it.
        let fcmPort = try FreePort.loopback()
        let accountFile = NSTemporaryDirectory() + "pushchat-bench-fcm-\(getpid()).json"
        let template = try String(contentsOfFile: certs + "/fcm-service-account.json", encoding: .utf8)
        try template.replacingOccurrences(
            of: #"https://127\.0\.0\.1:[0-9]+/token"#,
            with: "https://127.0.0.1:\(fcmPort)/token",
            options: .regularExpression
        ).write(toFile: accountFile, atomically: true, encoding: .utf8)
        if !field.simulatorProcess {
            configuration.fcmPort = fcmPort
            configuration.fcm.accounts = [SimulatorConfiguration.FCMAccount(try ServiceAccount(file: accountFile))]
        }
        // The browsers' push service, as far away as the other far ends (each answer delayed by the round trip).
        configuration.webPushPort = 0
        if rtt > .zero { configuration.webPush.answerDelay = rtt }
        // A push service stores messages it cannot read: the browsers' decryption (an ECDH each) is not the far end's.
        configuration.webPush.opensMessages = false
        let vapidKey = VAPIDKey.generate()
        let vapidFile = NSTemporaryDirectory() + "pushchat-bench-vapid-\(getpid()).pem"
        try vapidKey.pem.write(toFile: vapidFile, atomically: true, encoding: .utf8)
        // Any free port: its POST /webhooks is the webhook figure's receiver.
        configuration.statusPort = 0
        configuration.keepAll = false
        configuration.recentLimit = 10
        let simulator = try APNsSimulator(configuration: configuration, logger: logger)
        // The simulator runs for the whole benchmark; `finish()` ends it.
        let (portsStream, portsContinuation) = AsyncStream.makeStream(of: APNsSimulator.Ports.self)
        let (stopStream, stopContinuation) = AsyncStream.makeStream(of: Void.self)
        let running = Task {
            try await simulator.withRunning { ports in
                portsContinuation.yield(ports)
                for await _ in stopStream { break }
            }
        }
        var iterator = portsStream.makeAsyncIterator()
        guard let inProcessPorts = await iterator.next() else { throw SimulatorError(reason: "the simulator did not start") }
        // In the field, the daemons reach a simulator of its own process instead.
        let processes = try await FieldProcesses.start(
            field,
            binDir: binDir,
            certs: certs,
            fcmAccountFile: accountFile,
            fcmPort: fcmPort,
            topics: [developmentTopic, Self.betaTopic]
        )
        let ports = processes.simulatorPorts ?? inProcessPorts
        // Apple's distance: the daemons reach the simulator through proxies that delay each byte rtt/2 each way.
        var proxies: [LatencyProxy] = []
        var (gatewayPort, http2Port, fcmHostPort) = (ports.gateway, ports.http2, fcmPort)
        if rtt > .zero {
            proxies = [
                LatencyProxy(upstreamPort: ports.gateway, oneWay: rtt / 2), LatencyProxy(upstreamPort: ports.http2, oneWay: rtt / 2),
                LatencyProxy(upstreamPort: fcmPort, oneWay: rtt / 2),
            ]
            gatewayPort = try await proxies[0].start()
            http2Port = try await proxies[1].start()
            // FCM's messages cross the distance; the token URI (once an hour) is reached directly.
            fcmHostPort = try await proxies[2].start()
        }
        let started = proxies
        var processURL = url
        if field.multiHost {
            processURL.hosts += processURL.hosts
            processURL.targetSessionAttributes = .readWrite
        }
        let environment = [
            "PUSHCHAT_DATABASE_URL": processURL.connectionString,
            "PUSHCHAT_APNS_GATEWAY": "127.0.0.1:\(gatewayPort)",
            "PUSHCHAT_APNS_CERTIFICATE": certs + "/ck.pem",
            "PUSHCHAT_APNS_PASSPHRASE": passphrase,
            "PUSHCHAT_APNS_CA_FILE": certs + "/ca.pem",
            // Used when a figure picks PUSHCHAT_APNS_TRANSPORT=http2: token authentication with the development key.
            "PUSHCHAT_APNS_HOST": "127.0.0.1:\(http2Port)",
            "PUSHCHAT_APNS_TOPIC": developmentTopic,
            "PUSHCHAT_APNS_KEY_FILE": certs + "/AuthKey_\(developmentKeyID).p8",
            "PUSHCHAT_APNS_KEY_ID": developmentKeyID,
            "PUSHCHAT_APNS_TEAM_ID": developmentTeamID,
            "PUSHCHAT_LOG_FILE": "-",
            "PUSHCHAT_LOG_LEVEL": "warning",
            // The processes check the schema against the migrations the database was made with.
            "PUSHCHAT_MIGRATIONS_DIR": migrations,
        ]
        return Bench(
            url: url,
            server: server,
            simulator: simulator,
            ports: ports,
            environment: environment,
            fcmEnvironment: [
                "PUSHCHAT_FCM_SERVICE_ACCOUNT_FILE": accountFile,
                "PUSHCHAT_FCM_HOST": "127.0.0.1:\(fcmHostPort)",
                "PUSHCHAT_FCM_CA_FILE": certs + "/ca.pem",
            ],
            webEnvironment: [
                "PUSHCHAT_WEBPUSH_VAPID_KEY_FILE": vapidFile,
                "PUSHCHAT_WEBPUSH_SUBJECT": "mailto:bench@example.com",
                "PUSHCHAT_WEBPUSH_PRIVATE_HOSTS": "127.0.0.1:\(inProcessPorts.webPush ?? 0)",
                "PUSHCHAT_WEBPUSH_CA_FILE": URL(fileURLWithPath: certs + "/ca.pem").standardizedFileURL.path,
            ],
            vapidKey: vapidKey,
            overrides: overrides,
            binDir: binDir,
            field: processes,
            hasHistory: hasHistory,
            logger: logger
        ) {
            processes.stop()
            try? FileManager.default.removeItem(atPath: accountFile)
            try? FileManager.default.removeItem(atPath: vapidFile)
            for proxy in started { await proxy.stop() }
            stopContinuation.finish()
            _ = try? await running.value
        }
    }

    static let developmentKeyID = "DEVKEY0001"
    static let developmentTeamID = "DEVTEAM001"
    static let developmentTopic = "com.example.PushChat"

    func finish() async {
        await stop()
        try? await Self.execute(server, "DROP DATABASE IF EXISTS \(url.database) WITH (FORCE)", logger: logger)
    }

    // MARK: Figures

    /// Queues `rows` notifications, starts `daemons` push daemons, and measures until every row is stamped sent.
    /// With `summary`, one informational line instead of the figure and its checks (`memory` adds the RSS figure).
    func drain(
        rows: Int,
        daemons: Int,
        transport: APNsTransport = .binary,
        connections: Int = 1,
        summary: String? = nil,
        memory: Bool = false,
        oneDaemonRate: Double? = nil,
        fresh: Bool = true,
        platform: Platform = .apns
    ) async throws -> (figures: [Figure], rate: Double, cpu: String) {
        progress("drain (\(platform == .fcm ? "FCM" : platform == .web ? "Web Push" : transport.rawValue))")
        // A fresh queue (truncated and vacuumed), or rows added behind the earlier rounds' (back-to-back drains).
        if fresh { try await truncate("push_queue, push_history") }
        let firstID = try await scalar("SELECT coalesce(max(message_id), 0) FROM \(deliveries)")
        switch platform {
        case .apns:
            try await query(
                """
                INSERT INTO push_queue (device_token, payload)
                SELECT md5(g::text) || md5((g + 1)::text), '{"aps":{"alert":"Ann: message number ' || g || '","sound":"default"}}'
                FROM generate_series(1, \(rows)) g
                """
            )
        case .fcm:
            // Registration tokens of FCM's shape (103 characters), the chat's FCM message.
            try await query(
                """
                INSERT INTO push_queue (platform, device_token, payload)
                SELECT 'fcm', md5(g::text) || md5((g + 1)::text) || md5((g + 2)::text) || ':APA91b',
                       '{"notification":{"body":"Ann: message number ' || g || '"},"android":{"priority":"high"}}'
                FROM generate_series(1, \(rows)) g
                """
            )
        case .web:
            // Browsers of the simulator's push service, subscribed once; the chat's Declarative Web Push message.
            let tokens = try await browsers(rows)
            try await query(
                """
                INSERT INTO push_queue (platform, device_token, payload)
                SELECT 'web', t, '{"web_push":8030,"notification":{"title":"Ann","body":"message number ' || n || '","navigate":"/"}}'
                FROM unnest(\(tokens)::text[]) WITH ORDINALITY AS u(t, n)
                """ as PostgresQuery
            )
        }
        if fresh { try await query("VACUUM ANALYZE push_queue") }
        let acceptedBefore = try await accepted()
        var daemonEnvironment = ["PUSHCHAT_APNS_TRANSPORT": transport.rawValue, "PUSHCHAT_APNS_CONNECTIONS": "\(connections)"]
        if platform == .fcm { daemonEnvironment.merge(fcmEnvironment) { $1 } }
        if platform == .web { daemonEnvironment.merge(webEnvironment) { $1 } }
        let processes = try (0..<daemons).map { _ in try startDaemon(extra: daemonEnvironment) }
        func stopDaemons() {
            for process in processes where process.isRunning { process.terminate() }
            for process in processes { process.waitUntilExit() }
        }
        defer { stopDaemons() }
        // The WAL the drain wrote (its claims, stamps and moves): after each checkpoint a page's first change is written
        // whole again, so the WAL per row says how often a drain brings one on.
        let walSQL = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8"
        let walBefore = try await double(walSQL)
        let start = ContinuousClock.now
        let cpuBefore = (
            daemons: processes.map { Self.cpuSeconds(of: $0.processIdentifier) }.reduce(0, +), bench: field.simulatorCPUSeconds(),
            machine: Self.machineCPUSeconds()
        )
        var peakRSS = 0
        var samples: [Int] = []
        // Progress comes from the simulator (its counter, or its status page in the field): counting pending rows in
        // PostgreSQL every 50 ms took as much of the database as the daemon under test. The database is asked only once
        // the gateway has it all.
        var pending = rows
        while pending > 0 {
            let accepted = try await self.accepted() - acceptedBefore
            if accepted >= rows {
                pending = Int(try await scalar("SELECT count(*) FROM push_queue WHERE time_sent IS NULL AND time_failed IS NULL"))
            }
            let rss = processes.map { Self.residentMemory(of: $0.processIdentifier) }.max() ?? 0
            peakRSS = max(peakRSS, rss)
            let quarter = min(accepted, rows) * 4 / rows
            if quarter > samples.count - 1 || samples.isEmpty { samples.append(rss / 1024) }
            if ContinuousClock.now - start > .seconds(300) { throw SimulatorError(reason: "drain did not finish in 5 minutes") }
            try await Task.sleep(for: .milliseconds(50))
        }
        let wall = ContinuousClock.now - start
        // CPU per row: the daemons', and the simulator's (this process's, with the delaying proxy of --rtt-ms; or its own).
        let daemonCPU = processes.map { Self.cpuSeconds(of: $0.processIdentifier) }.reduce(0, +) - cpuBefore.daemons
        let benchCPU = field.simulatorCPUSeconds() - cpuBefore.bench
        let restCPU = Self.machineCPUSeconds() - cpuBefore.machine - daemonCPU - benchCPU
        let wal = try await double(walSQL) - walBefore
        let cpu = String(
            format: "CPU per row: daemon %.1f µs, simulator %.1f µs, the rest %.1f µs; WAL per row %.0f bytes",
            daemonCPU / Double(rows) * 1e6,
            benchCPU / Double(rows) * 1e6,
            restCPU / Double(rows) * 1e6,
            wal / Double(rows)
        )
        let span = try await double(
            "SELECT extract(epoch FROM max(time_sent) - min(time_sent))::float8 FROM \(deliveries) WHERE message_id > \(firstID)"
        )
        // Every row is stamped sent only after the gateway accepted it, so accepted − rows is the duplicates.
        let accepted = try await self.accepted() - acceptedBefore
        let duplicates = accepted - rows
        let rate = Double(rows) / max(span, 0.001)
        if !fresh {
            return ([], rate, cpu)
        }
        // The same rows through one raw move to push_history (what the daemon's stamps do), as a yardstick for this machine in this run, with the daemons
        // stopped: running, they would claim the rows the first UPDATE makes pending again and compete with (or
        // deadlock against) the second.
        stopDaemons()
        // The median of three (a single UPDATE varied 95,000–180,000 rows/s within one run: autovacuum and
        // checkpoints come and go beside it).
        var rawRates: [Double] = []
        for _ in 0..<3 {
            // A release before push_history stamps its rows in place: the yardstick is then the raw UPDATE.
            try await query(
                hasHistory
                    ? "WITH done AS (DELETE FROM push_history WHERE message_id > \(firstID) RETURNING *) "
                        + PushHistory.insert(into: "push_queue", from: "done", overriding: ["time_sent": "NULL"])
                    : "UPDATE push_queue SET time_sent = NULL WHERE message_id > \(firstID)"
            )
            let rawStart = ContinuousClock.now
            try await query(
                hasHistory
                    ? "WITH done AS (DELETE FROM push_queue RETURNING *) "
                        + PushHistory.insert(into: "push_history", from: "done", overriding: ["time_sent": "now()"])
                    : "UPDATE push_queue SET time_sent = now() WHERE message_id > \(firstID)"
            )
            rawRates.append(Double(rows) / (ContinuousClock.now - rawStart).seconds)
        }
        let raw = rawRates.sorted()[1]
        var label = daemons == 1 ? "one daemon" : "\(daemons) daemons sharing the queue"
        if connections > 1 {
            label += transport == .http2 ? ", up to \(connections) connections (the default)" : ", \(connections) connections"
        } else if daemons > 1, transport == .http2 {
            label += ", one connection each"
        }
        let target = transport == .http2 ? 20_000.0 : 50_000.0
        var figures = [
            Figure(
                name: "queue drain, \(platform == .fcm ? "FCM" : transport == .http2 ? "HTTP/2" : "binary"), \(label)",
                value:
                    "\(Int(rate)) rows/s (\(rows) rows in \(String(format: "%.2f", span)) s; \(String(format: "%.2f", wall.seconds)) s with start-up; \(cpu))",
                target: daemons == 1 ? (transport == .http2 ? "≥ 20,000 / s" : "≥ 50,000 / s") : "higher than one, no row sent twice",
                met: daemons == 1 ? rate >= target : oneDaemonRate.map { rate > $0 && duplicates == 0 }
            ),
            Figure(
                name: "  rows the gateway saw twice (\(label))",
                value: "\(duplicates) (\(accepted) accepted for \(rows) rows)",
                target: "0",
                met: duplicates == 0
            ),
            Figure(
                name: "  drain rate / raw UPDATE of the same rows",
                value: String(format: "%.2f (raw UPDATE, median of 3: %d rows/s; ", rate / raw, Int(raw))
                    + rawRates.map { "\(Int($0))" }.joined(separator: ", ") + ")",
                target: "-",
                met: nil
            ),
        ]
        if let summary {
            figures = [
                Figure(
                    name: "  (\(summary))",
                    value: "\(Int(rate)) rows/s, \(duplicates) sent twice, \(String(format: "%.2f", rate / raw)) of a raw UPDATE; \(cpu)",
                    target: "-",
                    met: nil
                )
            ]
        }
        if daemons == 1 && (memory || rows >= 1_000_000) {
            figures.insert(
                Figure(
                    name: "  push daemon RSS while draining \(rows) pending rows",
                    value: "peak \(peakRSS / 1024) MB; by quarter drained: \(samples.map { "\($0)" }.joined(separator: ", ")) MB",
                    target: "≤ 100 MB, flat",
                    met: peakRSS / 1024 <= 100
                ),
                at: memory ? 0 : figures.count
            )
        }
        return (figures, rate, cpu)
    }

    /// With the daemon idle, queues one row at a time and measures until the simulator decodes it.
    func idleLatency(samples: Int) async throws -> [Figure] {
        progress("idleLatency")
        try await truncate("push_queue, push_history")
        let process = try startDaemon(extra: ["PUSHCHAT_POLL_INTERVAL": "60"])
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        try await Task.sleep(for: .seconds(1))
        var latencies: [Double] = []
        let token = String(repeating: "ab", count: 32)
        try await Database.withConnection(url: url, applicationName: "pushchat-bench", logger: logger) { connection in
            for index in 0..<samples {
                let before = simulator.state.counters.accepted
                let sent = Date()
                try await connection.query(
                    "INSERT INTO push_queue (device_token, payload) VALUES (\(token), \("{\"aps\":{\"alert\":\"latency \(index)\"}}"))",
                    logger: logger
                )
                let deadline = ContinuousClock.now + .seconds(5)
                while simulator.state.counters.accepted == before && ContinuousClock.now < deadline {
                    try await Task.sleep(for: .microseconds(200))
                }
                guard let arrival = simulator.state.recent(limit: 1).last?.arrival, simulator.state.counters.accepted > before else {
                    throw SimulatorError(reason: "a notification did not arrive within 5 s")
                }
                latencies.append(arrival.timeIntervalSince(sent) * 1000)
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        latencies.sort()
        let p50 = latencies[latencies.count / 2]
        let p99 = latencies[min(latencies.count - 1, Int(Double(latencies.count) * 0.99))]
        return [
            Figure(
                name: "idle latency: row queued → decoded by the simulator",
                value: String(format: "p50 %.2f ms, p99 %.2f ms (%d samples)", p50, p99, latencies.count),
                target: "p50 ≤ 10 ms, p99 ≤ 50 ms",
                met: p50 <= 10 && p99 <= 50
            )
        ]
    }

    // MARK: Helpers

    func progress(_ figure: String) {
        FileHandle.standardError.write(Data("measuring \(figure)…\n".utf8))
    }

    func startDaemon(extra: [String: String] = [:]) throws -> Process {
        try startProcess("pushchat-push", ["development"], extra: ["PUSHCHAT_PUSH_STATUS_PORT": "0"].merging(extra) { $1 })
    }

    /// Runs `body` on one connection to the benchmark's database.
    func withConnection<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await Database.withConnection(url: url, applicationName: "pushchat-bench", logger: logger, body)
    }

    /// Empties `tables` (a comma-separated list), less `push_history` where the schema has none.
    func truncate(_ tables: String) async throws {
        let names = tables.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        try await query("TRUNCATE " + names.filter { hasHistory || $0 != "push_history" }.joined(separator: ", "))
    }

    /// Where every row is read, sent or not: the view over the queue and `push_history`, or the queue itself.
    var deliveries: String { hasHistory ? "push_deliveries" : "push_queue" }

    /// How many notifications the gateway has accepted so far (in this process, or from the simulator's status page).
    func accepted() async throws -> Int {
        try await field.accepted() ?? simulator.state.counters.accepted
    }

    func query(_ query: PostgresQuery) async throws {
        try await Database.withConnection(url: url, applicationName: "pushchat-bench", logger: logger) { connection in
            try await connection.query(query, logger: logger)
        }
    }

    func query(_ sql: String) async throws {
        try await Database.withConnection(url: url, applicationName: "pushchat-bench", logger: logger) { connection in
            try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
        }
    }

    func scalar(_ sql: String) async throws -> Int64 {
        try await value(sql, as: Int64.self) ?? 0
    }

    /// The first row's one column, nil without a row.
    func value<Value: PostgresDecodable & Sendable>(_ sql: String, as _: Value.Type) async throws -> Value? {
        try await Database.withConnection(url: url, applicationName: "pushchat-bench", logger: logger) { connection in
            for try await value in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).decode(Value.self) {
                return value
            }
            return nil
        }
    }

    func double(_ sql: String) async throws -> Double {
        try await Database.withConnection(url: url, applicationName: "pushchat-bench", logger: logger) { connection in
            for try await value in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).decode(Double.self) {
                return value
            }
            return 0
        }
    }

    static func execute(_ server: DatabaseURL, _ sql: String, logger: Logger) async throws {
        try await Database.withConnection(url: server, applicationName: "pushchat-bench", logger: logger) { connection in
            try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
        }
    }

    /// User and system CPU time a process has used, in seconds (Linux; 0 once it is gone).
    static func cpuSeconds(of pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return 0 }
        // After "pid (comm)": state is field 3, utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The CPU the whole machine has used, in seconds (busy time of all cores, from /proc/stat): less the processes
    /// measured apart, the rest is PostgreSQL's (and the bench's own polling).
    static func machineCPUSeconds() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") })
        else { return 0 }
        // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
        let ticks = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard ticks.count >= 8 else { return 0 }
        return (ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// This process's user and system CPU time, in seconds.
    static func ownCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Resident memory of a process in kB (Linux).
    static func residentMemory(of pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0
        }
        return 0
    }

    package static func printTable(_ figures: [Figure]) {
        let width = max(40, figures.map(\.name.count).max() ?? 0)
        let valueWidth = max(20, figures.map(\.value.count).max() ?? 0)
        func pad(_ text: String, _ count: Int) -> String { text + String(repeating: " ", count: max(0, count - text.count)) }
        print("\n" + pad("figure", width) + "  " + pad("measured", valueWidth) + "  target")
        print(String(repeating: "-", count: width + valueWidth + 30))
        for figure in figures {
            let mark = figure.met.map { $0 ? "  ok" : "  MISSED" } ?? ""
            print(pad(figure.name, width) + "  " + pad(figure.value, valueWidth) + "  " + figure.target + mark)
        }
    }
}
