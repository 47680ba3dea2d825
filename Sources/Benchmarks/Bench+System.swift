import APNs
import APNsTransport
import Foundation
import Logging
import NIOCore
import NIOSSL
import Observability
import PostgresNIO
import Push
import Settings
import Simulator
import Storage
import Support

#if canImport(Glibc)
import Glibc
#endif

extension Bench {
    /// Frames per second the simulator decodes from one TLS connection (it must never be the bottleneck).
    func simulatorDecodeRate(frames: Int, tls: NIOSSLContext) async throws -> [Figure] {
        progress("simulatorDecodeRate")
        let connector = BinaryConnector(endpoint: Endpoint(host: "127.0.0.1", port: ports.gateway), tls: tls)
        let (channel, _) = try await connector.connect()
        let payload = Array(#"{"aps":{"alert":"Ann: a benchmark message","sound":"default"}}"#.utf8)
        let token = [UInt8](repeating: 0xAB, count: 32)
        var chunk = ByteBuffer()
        for identifier in 0..<5000 {
            BinaryFrame.writeFrame(into: &chunk, token: token, payload: payload, identifier: UInt32(identifier), expiry: 0, priority: 10)
        }
        let before = simulator.state.counters.accepted
        let start = ContinuousClock.now
        try await channel.executeThenClose { _, outbound in
            for _ in 0..<(frames / 5000) { try await outbound.write(chunk) }
            while simulator.state.counters.accepted - before < frames / 5000 * 5000 {
                if ContinuousClock.now - start > .seconds(120) { break }
                try await Task.sleep(for: .milliseconds(2))
            }
        }
        let rate = Double(simulator.state.counters.accepted - before) / (ContinuousClock.now - start).seconds
        return [
            Figure(
                name: "simulator: frames decoded per second (one TLS connection)",
                value: "\(Int(rate)) frames/s",
                target: "hundreds of thousands / s",
                met: rate >= 200_000
            )
        ]
    }

    /// The API under concurrent load: `join` with a new udid each request, and `message` into a 10-member room.
    func apiThroughput(seconds: Int, connections: Int) async throws -> [Figure] {
        progress("apiThroughput")
        try await truncate("active_users, push_queue, push_history, messages")
        let port = try Self.freePort()
        let api = try startAPI(port: port, logLevel: "info")
        defer {
            api.terminate()
            api.waitUntilExit()
        }
        try await Self.waitForPort(port)
        let generator = LoadGenerator(port: port, connections: connections, duration: .seconds(Int64(seconds)))
        let joins = try await generator.run(path: "/api.php") { connection, index in
            let udid = String(format: "%08x%032x", connection, index)
            return "cmd=join&udid=\(udid)&token=\(String(repeating: "ab", count: 32))&name=Bench&code=room\(connection % 100)"
        }
        try await truncate("active_users, push_queue, push_history, messages")
        try await query(
            """
            INSERT INTO active_users (udid, device_token, nickname, secret_code)
            SELECT lpad(to_hex(g), 40, '0'), lpad(to_hex(g + 1000), 64, '0'), 'member ' || g, 'ten' FROM generate_series(1, 10) g
            """
        )
        let sender = String(repeating: "0", count: 39) + "1"
        let messages = try await generator.run(path: "/api.php") { _, index in "cmd=message&udid=\(sender)&text=message+\(index)" }
        let queued = try await scalar("SELECT count(*) FROM \(deliveries)")
        return [
            Figure(
                name: "API join (new udid each request), \(connections) clients",
                value:
                    "\(Int(joins.rate)) requests/s (\(joins.ok) in \(String(format: "%.1f", joins.elapsed.seconds)) s, \(joins.failed) failed)",
                target: "≥ 5,000 requests / s",
                met: joins.rate >= 5000 && joins.failed == 0
            ),
            Figure(
                name: "API message into a 10-member room, \(connections) clients",
                value: "\(Int(messages.rate)) requests/s (\(queued) rows queued, \(messages.failed) failed)",
                target: "≥ 3,000 requests / s",
                met: messages.rate >= 3000 && messages.failed == 0 && queued == Int64(messages.ok * 9)
            ),
        ]
    }

    /// One `message` into a 10,000-member room, through the API: the request's time, all rows queued.
    func fanOut(members: Int) async throws -> [Figure] {
        progress("fanOut")
        try await truncate("active_users, push_queue, push_history, messages")
        try await query(
            """
            INSERT INTO active_users (udid, device_token, nickname, secret_code)
            SELECT lpad(to_hex(g), 40, '0'), lpad(to_hex(g + 1000000), 64, '0'), 'member ' || g, 'big' FROM generate_series(1, \(members)) g
            """
        )
        try await query("VACUUM ANALYZE active_users")
        let port = try Self.freePort()
        let api = try startAPI(port: port)
        defer {
            api.terminate()
            api.waitUntilExit()
        }
        try await Self.waitForPort(port)
        let sender = String(format: "%040x", 1)
        var times: [Double] = []
        for round in 0..<5 {
            try await truncate("push_queue, push_history")
            let generator = LoadGenerator(port: port, connections: 1, duration: .zero)
            let start = ContinuousClock.now
            _ = try await generator.runOnce(path: "/api.php", form: "cmd=message&udid=\(sender)&text=round+\(round)")
            times.append((ContinuousClock.now - start).seconds * 1000)
        }
        let queued = try await scalar("SELECT count(*) FROM \(deliveries)")
        let best = times.min() ?? 0
        let median = times.sorted()[times.count / 2]
        return [
            Figure(
                name: "fan-out: one message into a \(members)-member room",
                value: String(format: "%.1f ms median, %.1f ms best (%lld rows queued)", median, best, queued),
                target: "≤ 100 ms",
                met: median <= 100 && queued == Int64(members - 1)
            )
        ]
    }

    /// The feedback job reading `tuples` tuples and pruning as many users.
    func feedback(tuples: Int) async throws -> [Figure] {
        progress("feedback")
        try await truncate("active_users, push_queue, push_history, messages, invalid_tokens")
        try await query(
            """
            INSERT INTO active_users (udid, device_token, nickname, secret_code, token_updated_at)
            SELECT lpad(to_hex(g), 40, '0'), lpad(to_hex(g), 64, '0'), 'user ' || g, 'room', now() - interval '2 days'
            FROM generate_series(1, \(tuples)) g
            """
        )
        let reported = UInt32(Date().timeIntervalSince1970 - 86_400)
        simulator.state.setFeedback(
            (1...tuples).map { n in
                FeedbackTuple(timestamp: reported, token: DeviceToken.bytes(hex: String(format: "%064x", n))!)
            }
        )
        let start = ContinuousClock.now
        // The binary transport: with HTTP/2 (production's default) there is no feedback service to read. Every user
        // is reported, far more than feedback_max_prune lets one run delete: --force, as an operator would after
        // checking.
        let job = try startProcess(
            "pushchat-feedback",
            ["production", "--force"],
            extra: ["PUSHCHAT_APNS_TRANSPORT": "binary", "PUSHCHAT_APNS_FEEDBACK": "127.0.0.1:\(ports.feedback)"]
        )
        job.waitUntilExit()
        let elapsed = (ContinuousClock.now - start).seconds
        let left = try await scalar("SELECT count(*) FROM active_users")
        return [
            Figure(
                name: "feedback job: \(tuples) tuples read and pruned",
                value: String(format: "%.2f s (exit %d, %lld users left)", elapsed, job.terminationStatus, left),
                target: "≤ 5 s",
                met: elapsed <= 5 && job.terminationStatus == 0 && left == 0
            )
        ]
    }

    // MARK: Helpers

    /// The load comes from one address and few devices: the abuse limits would measure themselves. (The API's metrics
    /// listener takes any free port: several APIs may run at once.)
    static let noLimits = [
        "PUSHCHAT_API_METRICS_PORT": "0",
        "PUSHCHAT_API_RATE_PER_IP": "0", "PUSHCHAT_API_RATE_PER_UDID": "0", "PUSHCHAT_API_MAX_ROOM_SIZE": "0",
        "PUSHCHAT_API_FANOUT_PER_IP": "0", "PUSHCHAT_API_FANOUT_PER_UDID": "0", "PUSHCHAT_API_MAX_CONNECTIONS_PER_IP": "0",
    ]

    /// `pushchat-api serve` on loopback `port`, without abuse limits (the figures measure something else).
    /// `extra` goes over the limits.
    /// Stops the processes a figure started (SIGTERM) and waits for each.
    static func stop(_ processes: [Process]) {
        for process in processes where process.isRunning { process.terminate() }
        for process in processes { process.waitUntilExit() }
    }

    func startAPI(port: Int, logLevel: String = "warning", extra: [String: String] = [:]) throws -> Process {
        try startProcess(
            "pushchat-api",
            ["serve", "production"],
            extra: ["PUSHCHAT_API_HOST": "127.0.0.1", "PUSHCHAT_API_PORT": "\(port)", "PUSHCHAT_LOG_LEVEL": logLevel]
                .merging(Self.noLimits) { $1 }.merging(extra) { $1 }
        )
    }

    func startProcess(_ name: String, _ arguments: [String], extra: [String: String] = [:]) throws -> Process {
        let process = Process()
        (process.executableURL, process.arguments) = field.command(binDir + "/" + name, arguments)
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHCHAT_") }
            .merging(environment) { $1 }.merging(extra) { $1 }.merging(overrides) { $1 }
        try field.attachOutput(of: process, named: name)
        try process.run()
        return process
    }

    static func freePort() throws -> Int { try FreePort.loopback() }

    static func waitForPort(_ port: Int) async throws {
        for _ in 0..<200 {
            let generator = LoadGenerator(port: port, connections: 1, duration: .zero)
            if (try? await generator.runOnce(path: "/", form: "")) != nil { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw SimulatorError(reason: "nothing answers on port \(port)")
    }
}

extension LoadGenerator {
    /// One request on a new connection; the response status code.
    func runOnce(path: String, form: String) async throws -> Int {
        try await single(path: path, form: form)
    }
}
