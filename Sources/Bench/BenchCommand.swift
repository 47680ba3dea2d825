import ArgumentParser
import Benchmarks
import Logging
import Settings
import Storage

/// `pushchat-bench`: measures the push path end to end on this machine and prints figures beside their targets.
/// Run it through `scripts/bench.sh`, which builds in release mode and starts a throwaway PostgreSQL. Only parses its
/// options: the figures are `Benchmarks`' (``Bench/run(_:logger:)``).
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
            "Only these figure groups, comma-separated: simulator, drain, http2, memory, latency, api, fanout, feedback, rounds, apps, fcm, broadcast, webhooks, webpush, chat (soak: with --soak-minutes)."
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
    @Option(
        name: .customLong("broadcast-devices"),
        help: "Registered devices of the broadcast figure (a broadcast to all while chat runs)."
    )
    var broadcastDevices = 1_000_000
    @Option(name: .customLong("chat-rate"), help: "Chat messages per second (10-member rooms) during the broadcast figure.")
    var chatRate = 2_000
    @Flag(
        help:
            "The field's way (scripts/bench.sh --field): the simulator as a process of its own; figures drain, rounds and chat unless --only says."
    )
    var field = false
    @Option(name: .customLong("service-user"), help: "Run every process under test as this user, without capabilities (as root).")
    var serviceUser: String?
    @Option(
        name: .customLong("gateway-nice"),
        help:
            "In the field, the niceness of the simulator's process: it stands in for Apple's and Google's servers, which do not share this machine's cores (negative only as root; 0: as the processes under test)."
    )
    var gatewayNice: Int32 = -10
    @Option(
        name: .customLong("gateway-threads"),
        help:
            "In the field, the simulator's event-loop threads (its --threads), each gateway connection served on one in turn: Apple's and Google's servers serve a provider's connections apart (1: all on one thread, where a broadcast's requests delay chat's)."
    )
    var gatewayThreads = 8
    @Option(
        name: .customLong("process-logs"),
        help: "A folder for the output of the processes under test and the simulator's, NAME.log each, appended (default: discarded)."
    )
    var processLogs: String?
    @Option(help: "The migrations folder the database is made with (another release's, to measure its binaries).")
    var migrations = "migrations"
    @Option(name: .customLong("chat-seconds"), help: "Seconds of the chat figure (chat at full speed through the API).")
    var chatSeconds = 120
    @Option(name: .customLong("chat-clients"), help: "Clients of the chat figure, each a room of 10.")
    var chatClients = 6
    @Option(help: "Idle-latency samples.")
    var samples = 300
    @Flag(
        name: .customLong("multi-host"),
        help: "The processes under test on a multi-host URL (the server named twice, target_session_attrs=read-write), as the guide's §17."
    )
    var multiHost = false
    @Option(name: .customLong("env"), help: "KEY=VALUE for the daemons under test, e.g. PUSHCHAT_PUSH_WINDOW=200 (repeatable).")
    var overrides: [String] = []

    func run() async throws {
        var logger = Logger(label: "pushchat-bench")
        logger.logLevel = .error
        var plan = BenchPlan(server: try DatabaseURL(parsing: databaseURL, key: "--database-url"), binDir: binDir, certs: certs)
        for pair in overrides {
            guard let equals = pair.firstIndex(of: "="), pair.hasPrefix("PUSHCHAT_") else {
                throw ValidationError("--env takes PUSHCHAT_KEY=VALUE, not '\(pair)'")
            }
            plan.overrides[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        plan.passphrase = passphrase
        plan.rows = rows
        plan.memoryRows = memoryRows
        plan.apiSeconds = apiSeconds
        plan.clients = clients
        plan.only = only.map { Set($0.split(separator: ",").map(String.init)) }
        plan.rttMilliseconds = rttMilliseconds
        plan.holdSnapshot = holdSnapshot
        plan.roundRows = roundRows
        plan.soakMinutes = soakMinutes
        plan.soakRate = soakRate
        plan.samples = samples
        plan.broadcastDevices = broadcastDevices
        plan.chatRate = chatRate
        plan.field = FieldPlan(
            simulatorProcess: field,
            serviceUser: serviceUser,
            multiHost: multiHost,
            simulatorNice: gatewayNice,
            processLogs: processLogs
        )
        plan.field.simulatorThreads = gatewayThreads
        plan.migrations = migrations
        plan.chatSeconds = chatSeconds
        plan.chatClients = chatClients
        do {
            Benchmarks.Bench.printTable(try await Benchmarks.Bench.run(plan, logger: logger))
        } catch {
            print("pushchat-bench: \(DatabaseError.describe(error))")
            throw ExitCode(1)
        }
    }
}
