import Crypto
import Foundation
import PostgresNIO
import Settings
import Simulator
import Storage
import Support
import WebPush

/// Browsers (issue 46): what a Web Push message costs the sender alone (the ECDH and the encryption of each message),
/// and a drain of 100,000 browsers on one push service, at the plan's round trip (each answer delayed so).
extension Bench {
    func webPushFigures(_ plan: BenchPlan) async throws -> [Figure] {
        var results = try encryptionCost(messages: 20_000)
        let rows = min(plan.rows, 100_000)
        let drained = try await drain(rows: rows, daemons: 1, transport: .http2, connections: 4, platform: .web)
        results += drained.figures
        results.append(
            .init(
                name: "  Web Push at this round trip (\(rows) browsers, one push service)",
                value: "\(Int(drained.rate)) messages/s",
                target: "≥ 20,000 / s (RTT 50 ms)",
                met: plan.rttMilliseconds == 50 ? drained.rate >= 20_000 : nil
            )
        )
        results += try pywebpush(rows: min(rows, 3_000), against: drained.rate)
        return results
    }

    /// pywebpush (PyPI) sending to `rows` browsers of the same simulator, one process, one message after another on
    /// a kept-alive session (its README's way; the simulator's push service answers it over HTTP/1.1, as requests
    /// speaks), at most 20 s: its rate beside `rate`, this sender's.
    func pywebpush(rows: Int, against rate: Double) throws -> [Figure] {
        let name = "  pywebpush against the same simulator (one process)"
        let script = FileManager.default.currentDirectoryPath + "/scripts/pywebpush-bench.py"
        guard (try? Self.runTool(["python3", "-c", "import pywebpush"])) != nil, FileManager.default.fileExists(atPath: script) else {
            let value = "not measured: python3 -m pip install pywebpush, and run from the checkout"
            return [.init(name: name, value: value, target: "-", met: nil)]
        }
        progress("Web Push: pywebpush against the same simulator")
        let directory = NSTemporaryDirectory() + "pushchat-bench-pywebpush-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let lines = (0..<rows).map { _ in simulator.state.webPush.subscribe(app: "pywebpush", applicationServerKey: vapidKey.publicKey) }
        try (lines.joined(separator: "\n") + "\n").write(toFile: directory + "/subscriptions.jsonl", atomically: true, encoding: .utf8)
        try vapidKey.pem.write(toFile: directory + "/vapid.pem", atomically: true, encoding: .utf8)
        let output = try Self.runTool(
            ["python3", script, directory + "/subscriptions.jsonl", directory + "/vapid.pem", "20"],
            environment: ["REQUESTS_CA_BUNDLE": webEnvironment["PUSHCHAT_WEBPUSH_CA_FILE"] ?? ""]
        )
        let parts = output.split(separator: " ").map { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 }
        guard parts.count == 3, parts[0] > 0, parts[1] > 0 else {
            return [.init(name: name, value: "failed: \(output)", target: "-", met: nil)]
        }
        let theirs = parts[0] / parts[1]
        return [
            .init(
                name: name,
                value: String(format: "%.0f messages/s (%d sent, %d answered 201)", theirs, Int(parts[0]), Int(parts[2])),
                target: "-",
                met: nil
            ),
            .init(
                name: "  this sender's rate over pywebpush's",
                value: String(format: "%.1f×", rate / theirs),
                target: "≥ 20×",
                met: rate / theirs >= 20
            ),
        ]
    }

    /// Runs a tool to its end: what it printed (a failure exit throws, with what it wrote on stderr).
    static func runTool(_ arguments: [String], environment: [String: String] = [:]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let problem = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let command = arguments.prefix(2).joined(separator: " ")
            throw SimulatorError(reason: "\(command) exited \(process.terminationStatus): \(problem.suffix(300))")
        }
        return text
    }

    /// Encrypting and framing `messages` chat messages for one browser on this thread (a fresh ECDH key and salt
    /// each, as the sender does): CPU per message, and what one core could send at most.
    func encryptionCost(messages: Int) throws -> [Figure] {
        progress("Web Push: the cost of a message alone")
        let service = WebPushService(options: .init())
        let subscription = try WebPushSubscription(json: Array(service.subscribe(app: "bench", applicationServerKey: nil).utf8))
        var tokens = VAPIDTokenCache(key: vapidKey, subject: "mailto:bench@example.com")
        let message = Array(#"{"web_push":8030,"notification":{"title":"Ann","body":"message number 1","navigate":"/"}}"#.utf8)
        let headers = WebPushHeaders(expiration: nil, priority: 10, collapseID: nil, now: Date())
        let cpuBefore = Self.ownCPUSeconds()
        let start = ContinuousClock.now
        var bytes = 0
        for _ in 0..<messages {
            let authorization = try tokens.authorization(for: subscription.origin, now: Date())
            bytes += try WebPushRequest(message: message, subscription: subscription, headers: headers, authorization: authorization).body
                .count
        }
        let wall = (ContinuousClock.now - start).seconds
        let cpu = Self.ownCPUSeconds() - cpuBefore
        let perMessage = cpu / Double(messages) * 1e6
        // Its two elliptic-curve steps alone: the sender's fresh key pair, and the shared secret with the browser's key.
        let keyCPU = Self.ownCPUSeconds()
        var keys: [P256.KeyAgreement.PrivateKey] = []
        keys.reserveCapacity(messages / 4)
        for _ in 0..<(messages / 4) { keys.append(ContentEncryption.freshKey()) }
        let perKey = (Self.ownCPUSeconds() - keyCPU) / Double(messages / 4) * 1e6
        let ecdhCPU = Self.ownCPUSeconds()
        for key in keys { _ = try key.sharedSecretFromKeyAgreement(with: subscription.userAgentKey) }
        let perECDH = (Self.ownCPUSeconds() - ecdhCPU) / Double(messages / 4) * 1e6
        return [
            .init(
                name: "Web Push: one message's ECDH, keys and aes128gcm (\(messages) messages, one thread)",
                value: String(
                    format: "%.1f µs CPU each (%.0f µs wall), %d bytes",
                    perMessage,
                    wall / Double(messages) * 1e6,
                    bytes / messages
                ),
                target: "-",
                met: nil
            ),
            .init(
                name: "  of which a key pair / an ECDH (swift-crypto's P-256)",
                value: String(format: "%.1f µs / %.1f µs CPU", perKey, perECDH),
                target: "-",
                met: nil
            ),
            .init(
                name: "  what one core could encrypt",
                value: String(format: "%.0f messages/s", 1e6 / max(perMessage, 0.001)),
                target: "-",
                met: nil
            ),
        ]
    }

    /// `count` browsers subscribed at the simulator (kept between drains) and stored as the API stores them: their tokens.
    func browsers(_ count: Int) async throws -> [String] {
        let stored = Int(try await scalar("SELECT count(*) FROM web_subscriptions"))
        if stored < count {
            var tokens: [String] = []
            var endpoints: [String] = []
            var keys: [String] = []
            var secrets: [String] = []
            for _ in stored..<count {
                let json = simulator.state.webPush.subscribe(app: "bench", applicationServerKey: vapidKey.publicKey)
                let subscription = try WebPushSubscription(json: Array(json.utf8))
                tokens.append(subscription.token)
                endpoints.append(subscription.endpoint.absoluteString)
                keys.append(subscription.p256dh)
                secrets.append(subscription.auth)
            }
            try await query(
                """
                INSERT INTO web_subscriptions (device_token, endpoint, p256dh, auth)
                SELECT * FROM unnest(\(tokens)::text[], \(endpoints)::text[], \(keys)::text[], \(secrets)::text[])
                """ as PostgresQuery
            )
        }
        return try await Database.withConnection(url: url, applicationName: "pushchat-bench", logger: logger) { connection in
            var tokens: [String] = []
            let rows = try await connection.query(
                "SELECT device_token FROM web_subscriptions ORDER BY device_token LIMIT \(count)",
                logger: logger
            )
            for try await token in rows.decode(String.self) { tokens.append(token) }
            return tokens
        }
    }
}
