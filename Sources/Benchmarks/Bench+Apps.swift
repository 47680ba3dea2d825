import Foundation
import PostgresNIO
import Simulator
import Support

extension Bench {
    static let betaTopic = "com.example.PushChat.beta"

    /// Fairness between apps (issue 29): app A (the default one, binary) drains `rows` pending rows alone, then again
    /// while app B (HTTP/2, its own connection) sends `samples` notifications one after another; B's notifications
    /// must reach the simulator within 1 s (p99) and A's drain rate stay within 10% of its rate alone.
    func appFairness(rows: Int, samples: Int = 100) async throws -> [Figure] {
        let keyFile = URL(fileURLWithPath: environment["PUSHCHAT_APNS_KEY_FILE"] ?? "").standardizedFileURL.path
        try await query(
            """
            INSERT INTO apps (name, bundle_id, environment, transport, key_file, key_id, team_id)
            VALUES ('beta', '\(Self.betaTopic)', 'sandbox', 'http2', '\(keyFile)', '\(Self.developmentKeyID)', '\(Self.developmentTeamID)')
            ON CONFLICT (name) DO NOTHING
            """
        )
        let alone = try await drain(rows: rows, daemons: 1, summary: "app A alone (binary), \(rows) pending rows").rate
        progress("apps (B's notifications while A drains \(rows) rows)")
        try await truncate("push_queue, push_history")
        try await query(
            """
            INSERT INTO push_queue (device_token, payload)
            SELECT md5(g::text) || md5((g + 1)::text), '{"aps":{"alert":"Ann: message number ' || g || '","sound":"default"}}'
            FROM generate_series(1, \(rows)) g
            """
        )
        try await query("VACUUM ANALYZE push_queue")
        let before = simulator.state.counters
        let acceptedBefore = before.accepted
        let http2Before = before.acceptedByFormat["http2"] ?? 0
        let daemon = try startDaemon(extra: ["PUSHCHAT_APNS_TRANSPORT": "binary"])
        defer {
            if daemon.isRunning { daemon.terminate() }
            daemon.waitUntilExit()
        }
        func accepted() -> (a: Int, b: Int) {
            let counters = simulator.state.counters
            let b = (counters.acceptedByFormat["http2"] ?? 0) - http2Before
            return (counters.accepted - acceptedBefore - b, b)
        }
        // A's drain under way (a twentieth through) before B's first notification.
        let start = ContinuousClock.now
        while accepted().a < rows / 20 {
            if ContinuousClock.now - start > .seconds(60) { throw BenchError("A's drain did not start within 60 s") }
            try await Task.sleep(for: .milliseconds(5))
        }
        // B's inserts on one connection, its arrivals read from the simulator every 2 ms, A's progress from the simulator
        // too: the measurement adds no connection, no count of pending rows and little lock traffic to A's drain (the
        // simulator shares this process).
        let (latencies, duringDrain) = try await withConnection { connection in
            var latencies: [Duration] = []
            var duringDrain = 0
            for sample in 0..<samples {
                let sent = ContinuousClock.now
                try await connection.query(
                    """
                    INSERT INTO push_queue (app, device_token, payload)
                    VALUES ('beta', md5(\("beta\(sample)")) || md5(\("b\(sample)")), \(#"{"aps":{"alert":"Beta: number \#(sample)"}}"#))
                    """,
                    logger: logger
                )
                while accepted().b <= sample {
                    if ContinuousClock.now - sent > .seconds(10) {
                        throw BenchError("B's notification \(sample) did not arrive within 10 s")
                    }
                    try await Task.sleep(for: .milliseconds(2))
                }
                latencies.append(ContinuousClock.now - sent)
                if accepted().a < rows { duringDrain += 1 }
                try await Task.sleep(for: .milliseconds(20))
            }
            return (latencies, duringDrain)
        }
        while accepted().a < rows {
            if ContinuousClock.now - start > .seconds(300) { throw BenchError("A's drain did not finish in 5 minutes") }
            try await Task.sleep(for: .milliseconds(50))
        }
        while try await scalar("SELECT count(*) FROM push_queue WHERE app = 'default' AND time_sent IS NULL AND time_failed IS NULL") > 0 {
            if ContinuousClock.now - start > .seconds(300) { throw BenchError("A's rows were not all stamped in 5 minutes") }
            try await Task.sleep(for: .milliseconds(100))
        }
        let span = try await double(
            "SELECT extract(epoch FROM max(time_sent) - min(time_sent))::float8 FROM push_deliveries WHERE app = 'default'"
        )
        let together = Double(rows) / max(span, 0.001)
        let sorted = latencies.sorted()
        func percentile(_ p: Double) -> Duration { sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)] }
        let p99 = percentile(0.99)
        func ms(_ duration: Duration) -> String { String(format: "%.1f ms", duration.seconds * 1000) }
        return [
            Figure(
                name: "apps: B's notification while A drains (p50 / p99 / max of \(latencies.count))",
                value: "\(ms(percentile(0.5))) / \(ms(p99)) / \(ms(sorted.last ?? .zero)) (\(duringDrain) sent while A's backlog drained)",
                target: "p99 ≤ 1 s",
                met: p99 <= .seconds(1) && duringDrain == latencies.count
            ),
            Figure(
                name: "  A's drain rate beside B / alone",
                value: String(format: "%.2f (%d rows/s beside B, %d alone)", together / alone, Int(together), Int(alone)),
                target: "≥ 0.90",
                met: together / alone >= 0.9
            ),
        ]
    }
}

/// A benchmark that could not measure (a drain that never started or finished).
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
