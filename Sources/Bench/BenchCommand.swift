import APNs
import ArgumentParser
import Foundation
import Logging
import Observability
import PostgresNIO
import Push
import Settings
import Simulator
import Storage
import Support

/// `pushchat-bench`: measures the push path end to end on this machine and prints figures beside their targets.
/// Run it through `scripts/bench.sh`, which builds in release mode and starts a throwaway PostgreSQL.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushchat-bench",
        abstract: "Measure queue drain rate and idle latency of pushchat-push against the local APNs simulator."
    )

    @Option(help: "PostgreSQL server URL (a database is created for the run and dropped after).")
    var databaseURL: String
    @Option(help: "Folder holding the release binaries (pushchat-push).")
    var binDir: String
    @Option(help: "Folder with the development certificates (deploy/dev-certs.sh).")
    var certs: String
    @Option(help: "Passphrase of ck.pem.")
    var passphrase = "pushchat"
    @Option(help: "Rows drained per drain figure.")
    var rows = 300_000
    @Option(help: "Pending rows for the memory figure.")
    var memoryRows = 1_000_000
    @Option(help: "Seconds of load per API figure.")
    var apiSeconds = 5
    @Option(help: "Concurrent clients for the API figures.")
    var clients = 32
    @Option(
        help:
            "Only these figure groups, comma-separated: simulator, drain, http2, memory, latency, api, fanout, feedback, rounds (soak: with --soak-minutes)."
    )
    var only: String?
    @Option(name: .customLong("rtt-ms"), help: "Apple's distance: every byte between the daemon and the simulator delayed N/2 ms each way.")
    var rttMilliseconds = 0
    @Flag(
        name: .customLong("hold-snapshot"),
        help: "Keep a session idle in a REPEATABLE READ transaction for the whole run (an operator's psql)."
    )
    var holdSnapshot = false
    @Option(help: "Rows per drain of the rounds figure (three back-to-back drains).")
    var roundRows = 200_000
    @Option(
        name: .customLong("soak-minutes"),
        help: "Minutes of steady chat traffic, RSS of the API and the daemon every minute (0: none)."
    )
    var soakMinutes = 0
    @Option(name: .customLong("soak-rate"), help: "Requests per second of the soak (joins and messages into 10-member rooms).")
    var soakRate = 1400
    @Option(help: "Idle-latency samples.")
    var samples = 300
    @Option(name: .customLong("env"), help: "KEY=VALUE for the daemons under test, e.g. PUSHCHAT_PUSH_WINDOW=200 (repeatable).")
    var overrides: [String] = []

    func run() async throws {
        var logger = Logger(label: "pushchat-bench")
        logger.logLevel = .error
        let server = try DatabaseURL(parsing: databaseURL, key: "--database-url")
        var environment: [String: String] = [:]
        for pair in overrides {
            guard let equals = pair.firstIndex(of: "="), pair.hasPrefix("PUSHCHAT_") else {
                throw ValidationError("--env takes PUSHCHAT_KEY=VALUE, not '\(pair)'")
            }
            environment[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        let bench = try await Bench.prepare(
            server: server,
            certs: certs,
            passphrase: passphrase,
            binDir: binDir,
            overrides: environment,
            rtt: .milliseconds(rttMilliseconds),
            logger: logger
        )
        var results: [Bench.Figure] = []
        var snapshot: Bench.HeldSnapshot?
        do {
            if holdSnapshot { snapshot = try await bench.holdSnapshot() }
            if rttMilliseconds > 0 {
                results.append(
                    .init(name: "(round trip to the simulator)", value: "\(rttMilliseconds) ms (a delaying proxy)", target: "-", met: nil)
                )
            }
            let tls = try GatewayTLS.clientContext(
                identity: try ClientIdentity.load(path: certs + "/ck.pem", passphrase: passphrase),
                caFile: certs + "/ca.pem"
            )
            var groups = Set((only ?? "simulator,drain,http2,memory,latency,api,fanout,feedback").split(separator: ",").map(String.init))
            if soakMinutes > 0 { groups.insert("soak") }
            if groups.contains("simulator") { results += try await bench.simulatorDecodeRate(frames: 500_000, tls: tls) }
            if groups.contains("drain") {
                let one = try await bench.drain(rows: rows, daemons: 1)
                results += one.figures
                results += try await bench.drain(rows: rows, daemons: 2, oneDaemonRate: one.rate).figures
            }
            if groups.contains("http2") {
                // The default: up to 4 connections, each opened while the open ones' streams are saturated.
                let elastic = try await bench.drain(rows: rows, daemons: 1, transport: .http2, connections: 4)
                results += elastic.figures
                let oneConnection = "HTTP/2 over one connection (apns_connections=1)"
                let one = try await bench.drain(rows: rows, daemons: 1, transport: .http2, summary: oneConnection)
                results += one.figures
                if rttMilliseconds > 0 {
                    // One connection carries at most MAX_CONCURRENT_STREAMS requests per round trip.
                    let bound = Double(SimulatorConfiguration.HTTP2Options().maxConcurrentStreams) * 1000 / Double(rttMilliseconds)
                    results.append(
                        .init(
                            name: "  one connection / its streams per round trip",
                            value: String(format: "%.2f (%d rows/s of %d)", one.rate / bound, Int(one.rate), Int(bound)),
                            target: "≥ 0.80",
                            met: one.rate / bound >= 0.8
                        )
                    )
                    // Apple tens of milliseconds away (issue 18): the default opens connections until it gets there.
                    results.append(
                        .init(
                            name: "  the default at this round trip",
                            value: "\(Int(elastic.rate)) rows/s",
                            target: "≥ 25,000 / s (RTT ≤ 50 ms)",
                            met: rttMilliseconds <= 50 ? elastic.rate >= 25_000 : nil
                        )
                    )
                }
            }
            if groups.contains("memory") {
                results += try await bench.drain(
                    rows: memoryRows,
                    daemons: 1,
                    summary: "drain rate with \(memoryRows) pending rows",
                    memory: true
                ).figures
            }
            if groups.contains("latency") { results += try await bench.idleLatency(samples: samples) }
            if groups.contains("api") { results += try await bench.apiThroughput(seconds: apiSeconds, connections: clients) }
            if groups.contains("fanout") { results += try await bench.fanOut(members: 10_000) }
            if groups.contains("feedback") { results += try await bench.feedback(tuples: 100_000) }
            if groups.contains("rounds") { results += try await bench.rounds(rows: roundRows, alreadyHeld: holdSnapshot) }
            if groups.contains("soak") { results += try await bench.soak(minutes: soakMinutes, rate: soakRate) }
        } catch {
            await snapshot?.release()
            await bench.finish()
            print("pushchat-bench: \(DatabaseError.describe(error))")
            throw ExitCode(1)
        }
        await snapshot?.release()
        await bench.finish()
        Bench.printTable(results)
    }
}
