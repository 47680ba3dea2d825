import Foundation
import NIOConcurrencyHelpers
import NIOHTTP1
import Settings
import Simulator
import Support

extension Bench {
    /// A broadcast at scale (issue 31): `devices` registered devices and 2,000 chat users in 10-member rooms; chat runs at
    /// `chatRate` messages/s through the API while a broadcast to all is sent through the API and drains. Prints the
    /// time to the 202, to the broadcast's first notification at the simulator, the broadcast's drain rate, and p50/p99
    /// from each chat message's answer to each of its notifications' receipt at the simulator.
    func broadcast(devices: Int, chatRate: Int, transport: String) async throws -> [Figure] {
        progress("broadcast (\(devices) devices, \(chatRate) chat messages/s, \(transport))")
        let rooms = 200
        try await truncate("active_users, push_queue, push_history, messages, notifications, idempotency_keys")
        try await query("DELETE FROM devices")
        try await query(
            """
            INSERT INTO devices (device_token, registered_by) SELECT lpad(to_hex(g), 64, '0'), 'bench' FROM generate_series(1, \(devices)) g
            """
        )
        // Chat users: tokens cccc…, ten to a room.
        try await query(
            """
            INSERT INTO active_users (udid, device_token, nickname, secret_code)
            SELECT lpad(to_hex(g), 40, '0'), '\(Self.chatTokenPrefix)' || lpad(to_hex(g), 60, '0'), 'member ' || g, 'room' || (g % \(rooms))
            FROM generate_series(1, \(rooms * 10)) g
            """
        )
        try await query("VACUUM ANALYZE devices")
        try await query("VACUUM ANALYZE active_users")
        let key = "pc_bench_broadcast_key"
        try await query(
            """
            INSERT INTO api_keys (name, key_hash, scopes) VALUES ('bench', encode(sha256('\(key)'::bytea), 'hex'), '{send,broadcast,status}')
            ON CONFLICT (name) DO UPDATE SET key_hash = EXCLUDED.key_hash, scopes = EXCLUDED.scopes, revoked_at = NULL
            """
        )

        // What the simulator receives: the broadcast's first notification, and each chat notification's arrival.
        struct Arrivals {
            var firstBroadcast: Date?
            var broadcast = 0
            var chat: [(connection: Int, index: Int, arrival: Date)] = []
        }
        let arrivals = NIOLockedValueBox(Arrivals())
        // In the field the simulator's process writes the chat notifications down (read at the end), and its counters
        // say how many of the others (the broadcast's) it took.
        let inField = field.simulatorPorts != nil
        if !inField {
            simulator.state.observe { notification in
                if notification.payload.contains("bench broadcast") {
                    arrivals.withLockedValue { arrivals in
                        if arrivals.firstBroadcast == nil { arrivals.firstBroadcast = notification.arrival }
                        arrivals.broadcast += 1
                    }
                } else if let (connection, index) = Self.chatMessage(in: notification.payload) {
                    arrivals.withLockedValue { $0.chat.append((connection, index, notification.arrival)) }
                }
            }
        }
        defer { simulator.state.observe(nil) }
        let recordedBefore = try await field.counters()?.recorded ?? 0
        let acceptedBefore = try await accepted()
        /// The broadcast's notifications the simulator took so far (in the field: its counters, polled).
        @Sendable func broadcastDelivered() async throws -> Int {
            guard inField, let counters = try await field.counters() else { return arrivals.withLockedValue { $0.broadcast } }
            return (counters.accepted - acceptedBefore) - (counters.recorded - recordedBefore)
        }

        let port = try Self.freePort()
        let api = try startAPI(port: port)
        let daemon = try startDaemon(extra: ["PUSHCHAT_APNS_TRANSPORT": transport])
        defer { Self.stop([api, daemon]) }
        try await Self.waitForPort(port)
        try await Task.sleep(for: .seconds(1))

        // Chat: `chatRate` messages/s from 40 connections, each a member of its own room, one request every 40/rate s.
        let connections = 40
        let answers = NIOLockedValueBox([Int: Date]())
        var generator = LoadGenerator(
            port: port,
            connections: connections,
            duration: .seconds(3600),
            interval: .nanoseconds(Int64(1e9 * Double(connections) / Double(chatRate)))
        )
        generator.onAnswer = { connection, index, status, time in
            if status == .ok { answers.withLockedValue { $0[connection * 1_000_000 + index] = time } }
        }
        let chat = Task {
            try await generator.run(path: "/api.php") { connection, index in
                // udid g = connection + 1, in room g % 200 with nine others.
                "cmd=message&udid=\(String(format: "%040x", connection + 1))&text=m\(connection)x\(index)"
            }
        }
        defer { chat.cancel() }
        // Chat alone first: its latency without a broadcast, for comparison.
        try await Task.sleep(for: .seconds(3))
        let aloneFrom = Date()
        try await Task.sleep(for: .seconds(10))
        let aloneUntil = Date()

        // The broadcast, through the API.
        let sent = Date()
        let status = try await LoadGenerator(port: port, connections: 1, duration: .zero).single(
            path: "/v1/notifications",
            form: #"{"to": {"all": true}, "aps": {"alert": "bench broadcast"}}"#,
            contentType: "application/json",
            headers: [("Authorization", "Bearer \(key)")]
        )
        let answered = Date()
        guard status == 202 else { throw BenchError("the broadcast was answered \(status)") }
        let total = Int(try await scalar("SELECT recipients FROM notifications"))
        // Bounded: on a machine that cannot carry the chat traffic, the broadcast gets its tenth of each claim and the
        // figure says how far it got.
        let deadline = ContinuousClock.now + .seconds(300)
        // In the field the chat users' own broadcast notifications are among the recorded ones, counted at the end.
        let awaited = inField ? total - rooms * 10 : total
        var delivered = 0
        while delivered < awaited && ContinuousClock.now < deadline {
            // In the field, the first notification's arrival is known to the poll's 20 ms.
            try await Task.sleep(for: .milliseconds(inField && delivered == 0 ? 20 : 100))
            delivered = try await broadcastDelivered()
            if inField, delivered > 0 { arrivals.withLockedValue { $0.firstBroadcast = $0.firstBroadcast ?? Date() } }
        }
        let drained = Date()
        chat.cancel()
        // Every chat row queued meanwhile is sent before the figures are read (up to 30 s more): a message answered
        // during the drain counts however late its notifications came.
        let stragglers = ContinuousClock.now + .seconds(30)
        while try await scalar("SELECT count(*) FROM push_queue WHERE NOT bulk") > 0, ContinuousClock.now < stragglers {
            try await Task.sleep(for: .milliseconds(100))
        }
        try await Task.sleep(for: .seconds(1))
        if inField {
            let recorded = try field.recordedChat()
            let chat = recorded.compactMap { line in
                Self.chatMessage(in: line.payload).map { (connection: $0.0, index: $0.1, arrival: line.arrival) }
            }
            arrivals.withLockedValue { $0.chat = chat }
            delivered += recorded.count { $0.payload.contains("bench broadcast") }
        }

        let (first, chatArrivals) = arrivals.withLockedValue { ($0.firstBroadcast, $0.chat) }
        let answerTimes = answers.withLockedValue { $0 }
        // The notifications of chat messages answered alone and while the broadcast drained, from their message's
        // answer to their arrival (whenever they came).
        func latencies(from start: Date, until end: Date) -> [Double] {
            var latencies: [Double] = []
            for arrival in chatArrivals {
                guard let answer = answerTimes[arrival.connection * 1_000_000 + arrival.index], answer >= start, answer <= end else {
                    continue
                }
                latencies.append(max(0, arrival.arrival.timeIntervalSince(answer)) * 1000)
            }
            return latencies.sorted()
        }
        let alone = latencies(from: aloneFrom, until: aloneUntil)
        let during = latencies(from: answered, until: drained)
        guard !during.isEmpty, !alone.isEmpty, let first else { throw BenchError("no chat notification arrived during the broadcast") }
        func percentile(_ sorted: [Double], _ p: Double) -> Double {
            sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
        }
        let (p50, p99, slowest) = (percentile(during, 0.5), percentile(during, 0.99), during.last ?? 0)
        let span = drained.timeIntervalSince(answered)
        let twice = try await scalar(
            "SELECT count(*) FROM (SELECT device_token FROM push_deliveries WHERE bulk GROUP BY device_token HAVING count(*) > 1) t"
        )
        // Where a chat row's time went while the broadcast drained, from PostgreSQL's clock: queued (the API's
        // transaction) → claimed (the lease's start: the lease as the daemon read it) → stamped sent (the result's
        // transaction); p50, p99 and max of each (a row found only by the safety net behind the claim cursors, once a
        // minute, shows in the first's max).
        let lease = overrides["PUSHCHAT_PUSH_LEASE"].flatMap(Configuration.parseDuration) ?? PushSettings().lease
        let stagesSQL = """
            SELECT coalesce(percentile_disc(ARRAY[0.5, 0.99, 1]) WITHIN GROUP (ORDER BY extract(epoch FROM claimed - time_queued) * 1000),
                            '{-1,-1,-1}')::bigint[] || coalesce(percentile_disc(ARRAY[0.5, 0.99, 1]) WITHIN GROUP
                            (ORDER BY extract(epoch FROM time_sent - claimed) * 1000), '{-1,-1,-1}')::bigint[]
            FROM (SELECT time_queued, claimed_until - make_interval(secs => \(lease.seconds)) AS claimed, time_sent FROM push_history
                  WHERE NOT bulk AND time_sent IS NOT NULL
                    AND time_queued BETWEEN to_timestamp(\(answered.timeIntervalSince1970)) AND to_timestamp(\(drained.timeIntervalSince1970))) t
            """
        let stages = try await value(stagesSQL, as: [Int64].self) ?? [-1, -1, -1, -1, -1, -1]
        let slowMessages = try await slowestMessages(
            answered: answered,
            drained: drained,
            lease: lease,
            arrivals: chatArrivals,
            answers: answerTimes
        )
        return [
            Figure(
                name: "broadcast to \(total) devices (\(transport)): the API's 202",
                value: String(format: "%.0f ms", answered.timeIntervalSince(sent) * 1000),
                target: "≤ 1 s",
                met: answered.timeIntervalSince(sent) <= 1
            ),
            Figure(
                name: "  its first notification at the simulator, after the 202",
                value: String(format: "%.0f ms", first.timeIntervalSince(answered) * 1000),
                target: "≤ 2 s",
                met: first.timeIntervalSince(answered) <= 2
            ),
            Figure(
                name: "  drained (202 → last notification)",
                value: delivered < total
                    ? String(
                        format: "%d of %d in %.0f s (%d rows/s), %d tokens queued twice",
                        delivered,
                        total,
                        span,
                        Int(Double(delivered) / span),
                        twice
                    )
                    : String(format: "%.1f s, %d rows/s, %d tokens queued twice", span, Int(Double(total) / span), twice),
                target: "all, 0 twice",
                met: delivered >= total && twice == 0
            ),
            Figure(
                name: "  chat alone before it (\(chatRate) messages/s into 10-member rooms): answer → simulator, p50 / p99 / max",
                value: String(format: "%.1f ms / %.1f ms / %.1f ms", percentile(alone, 0.5), percentile(alone, 0.99), alone.last ?? 0),
                target: "-",
                met: nil
            ),
            Figure(
                name: "  chat while it drains (\(Int(Double(during.count) / span)) notifications/s): answer → simulator, p50 / p99 / max",
                value: String(format: "%.1f ms / %.1f ms / %.1f ms", p50, p99, slowest),
                target: "p50 ≤ 20 ms, p99 (max in the field) ≤ 100 ms",
                met: p50 <= 20 && (inField ? slowest : p99) <= 100
            ),
            Figure(
                name: "    its rows meanwhile (PostgreSQL's clock): queued → claimed, claimed → stamped sent, p50 / p99 / max",
                value: "\(stages[0]) / \(stages[1]) / \(stages[2]) ms, \(stages[3]) / \(stages[4]) / \(stages[5]) ms",
                target: "-",
                met: nil
            ),
        ] + slowMessages
    }

    /// Where the slowest chat messages of the drain lost their time, each from its last notification's arrival: the
    /// API's transaction (its start, `time_queued`, → the answer at the client), the answer → the claim of its last row
    /// (the lease's start: the daemon's claim statement began), the claim → the arrival at the simulator (the claim's
    /// statement and commit, the wait for the writer, the write, the gateway). Clocks: PostgreSQL's, the bench's and the
    /// simulator's, all this machine's.
    private func slowestMessages(
        answered: Date,
        drained: Date,
        lease: Duration,
        arrivals: [(connection: Int, index: Int, arrival: Date)],
        answers: [Int: Date]
    ) async throws -> [Figure] {
        let rows =
            try await value(
                """
                SELECT coalesce(array_agg(payload || E'\t' || extract(epoch FROM time_queued) || E'\t'
                                          || extract(epoch FROM claimed_until - make_interval(secs => \(lease.seconds)))), '{}')
                FROM push_history WHERE NOT bulk AND time_sent IS NOT NULL
                  AND time_queued BETWEEN to_timestamp(\(answered.timeIntervalSince1970)) AND to_timestamp(\(drained.timeIntervalSince1970))
                """,
                as: [String].self
            ) ?? []
        // Per message: its first row's start of the transaction, its last row's claim, its last arrival.
        var queued: [Int: Double] = [:]
        var claimed: [Int: Double] = [:]
        for row in rows {
            let fields = row.split(separator: "\t")
            guard fields.count == 3, let (connection, index) = Self.chatMessage(in: String(fields[0])),
                let start = Double(fields[1]), let claim = Double(fields[2])
            else { continue }
            let key = connection * 1_000_000 + index
            queued[key] = min(queued[key] ?? start, start)
            claimed[key] = max(claimed[key] ?? claim, claim)
        }
        var last: [Int: Date] = [:]
        for arrival in arrivals {
            let key = arrival.connection * 1_000_000 + arrival.index
            last[key] = max(last[key] ?? arrival.arrival, arrival.arrival)
        }
        struct Parts { let total, api, toClaim, afterClaim: Double }
        var parts: [Parts] = []
        for (key, arrival) in last {
            guard let answer = answers[key], answer >= answered, answer <= drained, let start = queued[key], let claim = claimed[key] else {
                continue
            }
            let (a, c, r) = (answer.timeIntervalSince1970, claim, arrival.timeIntervalSince1970)
            parts.append(Parts(total: (r - a) * 1000, api: (a - start) * 1000, toClaim: (c - a) * 1000, afterClaim: (r - c) * 1000))
        }
        parts.sort { $0.total > $1.total }
        guard !parts.isEmpty else { return [] }
        let slow = parts.filter { $0.total > 100 }
        func median(_ values: [Double]) -> Double { values.isEmpty ? 0 : values.sorted()[values.count / 2] }
        let listed = parts.prefix(5).map { String(format: "%.0f (%.0f, %.0f, %.0f)", $0.total, $0.api, $0.toClaim, $0.afterClaim) }
        return [
            Figure(
                name: "    its slowest messages, ms: answer → last arrival (API transaction → answer, answer → claimed, claimed → arrival)",
                value: listed.joined(separator: ", "),
                target: "-",
                met: nil
            ),
            Figure(
                name: "    messages over 100 ms: how many, and the median of each part (API, → claimed, → arrival)",
                value: String(
                    format: "%d of %d: %.0f / %.0f / %.0f ms",
                    slow.count,
                    parts.count,
                    median(slow.map(\.api)),
                    median(slow.map(\.toClaim)),
                    median(slow.map(\.afterClaim))
                ),
                target: "-",
                met: nil
            ),
        ]
    }

    /// The device tokens of the broadcast figure's chat users start with this (the simulator's process records them).
    static let chatTokenPrefix = "cccc"

    /// The connection and index of a chat message `m<connection>x<index>` in a notification's payload.
    static func chatMessage(in payload: String) -> (Int, Int)? {
        guard let start = payload.range(of: ": m") else { return nil }
        let rest = payload[start.upperBound...]
        guard let x = rest.firstIndex(of: "x") else { return nil }
        let digits = rest[rest.index(after: x)...].prefix { $0.isNumber }
        guard let connection = Int(rest[..<x]), let index = Int(digits) else { return nil }
        return (connection, index)
    }
}
