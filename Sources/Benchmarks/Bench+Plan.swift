import APNs
import APNsTransport
import Foundation
package import Logging
package import Settings
import Simulator
import Storage

/// What one `pushchat-bench` run measures and how big (the command's options, parsed).
package struct BenchPlan: Sendable {
    package var server: DatabaseURL
    package var binDir: String
    package var certs: String
    package var passphrase = "pushchat"
    package var rows = 300_000
    package var memoryRows = 1_000_000
    package var apiSeconds = 5
    package var clients = 32
    /// The figure groups; nil: every group but rounds, soak and apps.
    package var only: Set<String>?
    package var rttMilliseconds = 0
    package var holdSnapshot = false
    package var roundRows = 200_000
    package var soakMinutes = 0
    package var soakRate = 1400
    package var samples = 300
    /// The broadcast figure: registered devices, and chat messages per second meanwhile.
    package var broadcastDevices = 1_000_000
    package var chatRate = 2_000
    /// `PUSHCHAT_*` settings for the processes under test, over each figure's own.
    package var overrides: [String: String] = [:]
    /// The field's way of running the processes (issue 43).
    package var field = FieldPlan()
    /// The migrations the benchmark's database is made with (another release's, to measure its binaries).
    package var migrations = "migrations"
    /// The chat figure: seconds of chat traffic at full speed, and its clients.
    package var chatSeconds = 120
    package var chatClients = 6

    package init(server: DatabaseURL, binDir: String, certs: String) {
        self.server = server
        self.binDir = binDir
        self.certs = certs
    }

    static let defaultGroups: Set<String> = ["simulator", "drain", "http2", "memory", "latency", "api", "fanout", "feedback"]
    /// The groups that read the simulator through its counters only, so they run against its own process too.
    static let fieldGroups: Set<String> = ["drain", "http2", "memory", "api", "rounds", "chat", "soak", "broadcast", "webhooks"]
    /// The groups with `--field` and no `--only`: what the field's issue reports.
    static let defaultFieldGroups: Set<String> = ["drain", "rounds", "chat"]
}

extension Bench {
    /// Runs every figure `plan` asks for; the figures in order. The database and the simulator are set up first and
    /// torn down after, whatever happens.
    package static func run(_ plan: BenchPlan, logger: Logger) async throws -> [Figure] {
        if plan.field.simulatorProcess, let only = plan.only, !only.isSubset(of: BenchPlan.fieldGroups) {
            throw SimulatorError(
                reason:
                    "--field runs \(BenchPlan.fieldGroups.sorted().joined(separator: ", ")) only (the others read the simulator in this process), not "
                    + only.subtracting(BenchPlan.fieldGroups).sorted().joined(separator: ", ")
            )
        }
        var field = plan.field
        // The broadcast figure reads each chat notification's arrival: the simulator's process writes them down.
        field.recordChat = field.simulatorProcess && plan.only?.contains("broadcast") == true
        let bench = try await Bench.prepare(
            server: plan.server,
            certs: plan.certs,
            passphrase: plan.passphrase,
            binDir: plan.binDir,
            overrides: plan.overrides,
            rtt: .milliseconds(plan.rttMilliseconds),
            migrations: plan.migrations,
            field: field,
            logger: logger
        )
        var snapshot: Bench.HeldSnapshot?
        do {
            if plan.holdSnapshot { snapshot = try await bench.holdSnapshot() }
            let results = try await bench.figures(plan)
            await snapshot?.release()
            await bench.finish()
            return results
        } catch {
            await snapshot?.release()
            await bench.finish()
            throw error
        }
    }

    private func figures(_ plan: BenchPlan) async throws -> [Figure] {
        var results: [Figure] = []
        if plan.rttMilliseconds > 0 {
            results.append(
                .init(name: "(round trip to the simulator)", value: "\(plan.rttMilliseconds) ms (a delaying proxy)", target: "-", met: nil)
            )
        }
        let tls = try GatewayTLS.clientContext(
            identity: try ClientIdentity.load(path: plan.certs + "/ck.pem", passphrase: plan.passphrase),
            caFile: plan.certs + "/ca.pem"
        )
        var groups = plan.only ?? (plan.field.simulatorProcess ? BenchPlan.defaultFieldGroups : BenchPlan.defaultGroups)
        if plan.soakMinutes > 0 { groups.insert("soak") }
        if plan.field.simulatorProcess {
            results += try await fieldConditions()
        }
        if groups.contains("simulator") { results += try await simulatorDecodeRate(frames: 500_000, tls: tls) }
        if groups.contains("drain") {
            let one = try await drain(rows: plan.rows, daemons: 1)
            results += one.figures
            results += try await drain(rows: plan.rows, daemons: 2, oneDaemonRate: one.rate).figures
            // Scale-out (issue 31): a third daemon, each its own process with its own connections.
            results += try await drain(rows: plan.rows, daemons: 3, oneDaemonRate: one.rate).figures
        }
        if groups.contains("http2") { results += try await http2Figures(plan) }
        if groups.contains("memory") {
            results += try await drain(
                rows: plan.memoryRows,
                daemons: 1,
                summary: "drain rate with \(plan.memoryRows) pending rows",
                memory: true
            ).figures
        }
        if groups.contains("latency") { results += try await idleLatency(samples: plan.samples) }
        if groups.contains("api") { results += try await apiThroughput(seconds: plan.apiSeconds, connections: plan.clients) }
        if groups.contains("fanout") { results += try await fanOut(members: 10_000) }
        if groups.contains("feedback") { results += try await feedback(tuples: 100_000) }
        if groups.contains("rounds") { results += try await rounds(rows: plan.roundRows, alreadyHeld: plan.holdSnapshot) }
        if groups.contains("chat") { results += try await chat(seconds: plan.chatSeconds, clients: plan.chatClients) }
        if groups.contains("soak") { results += try await soak(minutes: plan.soakMinutes, rate: plan.soakRate) }
        if groups.contains("apps") { results += try await appFairness(rows: plan.memoryRows) }
        if groups.contains("fcm") { results += try await fcmFigures(plan) }
        if groups.contains("webpush") { results += try await webPushFigures(plan) }
        if groups.contains("webhooks") {
            results += try await webhookBroadcasts(devices: plan.broadcastDevices, transport: "http2")
        }
        if groups.contains("broadcast") {
            results += try await broadcast(devices: plan.broadcastDevices, chatRate: plan.chatRate, transport: "http2")
        }
        return results
    }

    /// FCM's drain with the defaults (up to 4 connections on demand, one shared access token) beside APNs' HTTP/2 in the
    /// same run, at the plan's round trip (issue 30: at 50 ms, at least 20,000 messages/s, none sent twice).
    private func fcmFigures(_ plan: BenchPlan) async throws -> [Figure] {
        let apns = try await drain(
            rows: plan.rows,
            daemons: 1,
            transport: .http2,
            connections: 4,
            summary: "beside it, APNs over HTTP/2 with the same defaults"
        )
        let fcm = try await drain(rows: plan.rows, daemons: 1, transport: .http2, connections: 4, platform: .fcm)
        return fcm.figures + apns.figures
    }

    /// The default (up to 4 connections, each opened while the open ones' streams are saturated) and one connection;
    /// at a round trip, how close one connection comes to its streams per round trip.
    private func http2Figures(_ plan: BenchPlan) async throws -> [Figure] {
        var results: [Figure] = []
        let elastic = try await drain(rows: plan.rows, daemons: 1, transport: .http2, connections: 4)
        results += elastic.figures
        let one = try await drain(
            rows: plan.rows,
            daemons: 1,
            transport: .http2,
            summary: "HTTP/2 over one connection (apns_connections=1)"
        )
        results += one.figures
        guard plan.rttMilliseconds > 0 else { return results }
        // Scale-out where the gateway's round trip is the limit (issue 31, item 5): daemons on several machines, each
        // with its own connection, sharing the queue.
        for daemons in [2, 3] {
            results += try await drain(rows: plan.rows, daemons: daemons, transport: .http2, oneDaemonRate: one.rate).figures
        }
        // One connection carries at most MAX_CONCURRENT_STREAMS requests per round trip.
        let bound = Double(SimulatorConfiguration.HTTP2Options().maxConcurrentStreams) * 1000 / Double(plan.rttMilliseconds)
        results.append(
            .init(
                name: "  one connection / its streams per round trip",
                value: String(format: "%.2f (%d rows/s of %d)", one.rate / bound, Int(one.rate), Int(bound)),
                target: "≥ 0.90",
                met: one.rate / bound >= 0.9
            )
        )
        // Apple tens of milliseconds away (issue 18): the default opens connections until it gets there.
        results.append(
            .init(
                name: "  the default at this round trip",
                value: "\(Int(elastic.rate)) rows/s",
                target: "≥ 25,000 / s (RTT ≤ 50 ms)",
                met: plan.rttMilliseconds <= 50 ? elastic.rate >= 25_000 : nil
            )
        )
        return results
    }
}
