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
        results.append(
            .init(
                name: "  pywebpush against the same simulator",
                value: "not measured: the simulator's push service speaks HTTP/2 only, pywebpush HTTP/1.1",
                target: "this ≥ 20× its rate",
                met: nil
            )
        )
        return results
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
        let cpuBefore = Self.processCPUSeconds()
        let start = ContinuousClock.now
        var bytes = 0
        for _ in 0..<messages {
            let authorization = try tokens.authorization(for: subscription.origin, now: Date())
            bytes += try WebPushRequest(message: message, subscription: subscription, headers: headers, authorization: authorization).body
                .count
        }
        let wall = (ContinuousClock.now - start).seconds
        let cpu = Self.processCPUSeconds() - cpuBefore
        let perMessage = cpu / Double(messages) * 1e6
        // Its two elliptic-curve steps alone: the sender's fresh key pair, and the shared secret with the browser's key.
        let keyCPU = Self.processCPUSeconds()
        var keys: [P256.KeyAgreement.PrivateKey] = []
        keys.reserveCapacity(messages / 4)
        for _ in 0..<(messages / 4) { keys.append(ContentEncryption.freshKey()) }
        let perKey = (Self.processCPUSeconds() - keyCPU) / Double(messages / 4) * 1e6
        let ecdhCPU = Self.processCPUSeconds()
        for key in keys { _ = try key.sharedSecretFromKeyAgreement(with: subscription.userAgentKey) }
        let perECDH = (Self.processCPUSeconds() - ecdhCPU) / Double(messages / 4) * 1e6
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

    /// This process's CPU seconds so far.
    static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
