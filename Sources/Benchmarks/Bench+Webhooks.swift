import Foundation
import Simulator
import Support

extension Bench {
    /// Delivery events at scale (issue 45): a broadcast to `devices` devices through the API, without a webhook and with
    /// one that asks for `notification.sent` (one event per device) and `notification.completed`, POSTed to the
    /// simulator's receiver (`POST /webhooks` on its status page); alternated off, on, on, off. Prints each drain's rate,
    /// the rate with events against without, and how long the outbox took to empty after the broadcast's end.
    func webhookBroadcasts(devices: Int, transport: String) async throws -> [Figure] {
        progress("broadcasts with and without delivery events (\(devices) devices, \(transport))")
        guard let receiverPort = ports.status else { throw BenchError("the simulator's status page (the webhook receiver) is off") }
        try await query("DELETE FROM devices")
        try await query(
            """
            INSERT INTO devices (device_token, registered_by) SELECT lpad(to_hex(g), 64, '0'), 'bench' FROM generate_series(1, \(devices)) g
            """
        )
        try await query("VACUUM ANALYZE devices")
        let key = "pc_bench_webhook_key"
        try await query(
            """
            INSERT INTO api_keys (name, key_hash, scopes) VALUES ('bench-webhooks', encode(sha256('\(key)'::bytea), 'hex'), '{send,broadcast,status}')
            ON CONFLICT (name) DO UPDATE SET key_hash = EXCLUDED.key_hash, scopes = EXCLUDED.scopes, revoked_at = NULL
            """
        )
        var rates: [Bool: [Double]] = [:]
        var outboxDrains: [Double] = []
        var eventsMissing = 0
        // CPU seconds over each drain (the 202 to the last notification): the daemon, the simulator, the machine.
        var cpu: [Bool: [(daemon: Double, simulator: Double, rest: Double)]] = [:]
        for withEvents in [false, true, true, false] {
            try await truncate("active_users, push_queue, push_history, messages, notifications, idempotency_keys")
            try await query("DELETE FROM webhooks")
            if withEvents {
                try await query(
                    """
                    INSERT INTO webhooks (name, app, url, secret, events)
                    VALUES ('bench', 'default', 'http://127.0.0.1:\(receiverPort)/webhooks', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
                            '{notification.sent,notification.completed}')
                    """
                )
            }
            let acceptedBefore = try await accepted()
            let eventsBefore = try await webhookEvents()
            let port = try Self.freePort()
            let api = try startAPI(port: port)
            // The same settings in both: only the webhook's row differs.
            let daemon = try startDaemon(extra: [
                "PUSHCHAT_APNS_TRANSPORT": transport, "PUSHCHAT_WEBHOOK_PRIVATE_HOSTS": "127.0.0.1:\(receiverPort)",
            ])
            defer { Self.stop([api, daemon]) }
            try await Self.waitForPort(port)
            try await Task.sleep(for: .seconds(1))
            let cpuBefore = (
                daemon: Self.cpuSeconds(of: daemon.processIdentifier), simulator: field.simulatorCPUSeconds(),
                rest: Self.machineCPUSeconds()
            )
            let status = try await LoadGenerator(port: port, connections: 1, duration: .zero).single(
                path: "/v1/notifications",
                form: #"{"to": {"all": true}, "aps": {"alert": "bench webhooks"}}"#,
                contentType: "application/json",
                headers: [("Authorization", "Bearer \(key)")]
            )
            let answered = ContinuousClock.now
            guard status == 202 else { throw BenchError("the broadcast was answered \(status)") }
            let deadline = answered + .seconds(600)
            while try await accepted() - acceptedBefore < devices && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
            let drained = ContinuousClock.now
            cpu[withEvents, default: []].append(
                (
                    daemon: Self.cpuSeconds(of: daemon.processIdentifier) - cpuBefore.daemon,
                    simulator: field.simulatorCPUSeconds() - cpuBefore.simulator,
                    rest: Self.machineCPUSeconds() - cpuBefore.rest
                )
            )
            let delivered = try await accepted() - acceptedBefore
            guard delivered >= devices else { throw BenchError("only \(delivered) of \(devices) delivered in 600 s") }
            rates[withEvents, default: []].append(Double(devices) / (drained - answered).seconds)
            guard withEvents else { continue }
            // The outbox empties behind the drain: how long after its last notification.
            let expected = devices + 1
            while try await webhookEvents() - eventsBefore < expected && ContinuousClock.now < drained + .seconds(600) {
                try await Task.sleep(for: .milliseconds(100))
            }
            outboxDrains.append((ContinuousClock.now - drained).seconds)
            eventsMissing += max(0, expected - (try await webhookEvents() - eventsBefore))
        }
        try await query("DELETE FROM webhooks")
        let without = rates[false] ?? []
        let with = rates[true] ?? []
        let ratio = (with.reduce(0, +) / Double(max(with.count, 1))) / (without.reduce(0, +) / Double(max(without.count, 1)))
        func list(_ values: [Double]) -> String { values.map { String(format: "%.0f", $0) }.joined(separator: " · ") }
        func cpuList(_ runs: [(daemon: Double, simulator: Double, rest: Double)]) -> String {
            runs.map { String(format: "%.1f / %.1f / %.1f", $0.daemon, $0.simulator, $0.rest - $0.daemon - $0.simulator) }.joined(
                separator: " · "
            )
        }
        return [
            Figure(
                name: "broadcast to \(devices) devices (\(transport)), no webhook: rows/s (runs 1 and 4)",
                value: list(without),
                target: "-",
                met: nil
            ),
            Figure(
                name: "  with a webhook for notification.sent: rows/s (runs 2 and 3), mean against without",
                value: "\(list(with)); \(String(format: "%.2f", ratio))",
                target: "≥ 0.90",
                met: ratio >= 0.9
            ),
            Figure(
                name: "  CPU s over each drain: daemon / simulator / the rest (PostgreSQL)",
                value: "without \(cpuList(cpu[false] ?? [])); with \(cpuList(cpu[true] ?? []))",
                target: "-",
                met: nil
            ),
            Figure(
                name: "  its outbox empty after the broadcast's last notification (\(devices + 1) events each)",
                value: outboxDrains.map { String(format: "%.1f s", $0) }.joined(separator: " · ")
                    + (eventsMissing > 0 ? ", \(eventsMissing) events missing" : ""),
                target: "≤ 60 s, none missing",
                met: outboxDrains.allSatisfy { $0 <= 60 } && eventsMissing == 0
            ),
        ]
    }

    /// The events the simulator's receiver took so far (its process's, in the field).
    func webhookEvents() async throws -> Int {
        try await field.webhookEvents() ?? simulator.state.webhooks.counters.events
    }
}
