import Foundation
import NIOConcurrencyHelpers
import Simulator
import Support

#if canImport(Glibc)
import Glibc
#endif

/// How the field runs what the bench measures (issue 43), when asked for: the simulator as a process of its own rather
/// than in the bench's process, and every process as the service user without capabilities, as systemd runs them.
/// (PostgreSQL with TLS and its durability on is `scripts/bench.sh --field`'s part: the server the bench is given.)
package struct FieldPlan: Sendable {
    /// Run `pushchat-apns-sim` as a process of its own.
    package var simulatorProcess = false
    /// The account every process under test runs as (root only); nil: this process's user.
    package var serviceUser: String?
    /// The simulator's process writes the chat notifications it accepts (tokens `cccc…`) to a file, with their arrival
    /// times (the broadcast figure's chat latencies).
    var recordChat = false
    /// The processes under test reach the database through a multi-host URL (the same server named twice,
    /// `target_session_attrs=read-write`), as the guide's §17 sets it: what choosing a host costs.
    package var multiHost = false
    /// The niceness the simulator's process runs at (0: as the others). The simulator stands in for Apple's and
    /// Google's servers, which do not share this machine's cores: at the same priority it took a share of them like
    /// any process under test, fell behind, and its unread requests were what chat waited for during a broadcast
    /// (issue 43, item 5). Negative needs root: otherwise 0.
    package var simulatorNice: Int32 = 0
    /// The simulator's event-loop threads (its `--threads`): each connection is served on one of them in turn. On one
    /// thread a broadcast's connections and chat's shared it, and chat's requests waited unread behind the broadcast's
    /// (issue 43, item 5): Apple's and Google's servers serve a provider's connections apart.
    package var simulatorThreads = 1
    /// A folder the processes' output goes to, one `NAME.log` each, appended (nil: discarded). Their warnings say what a
    /// figure's outliers met (a reconnection, a retry).
    package var processLogs: String?

    package init(
        simulatorProcess: Bool = false,
        serviceUser: String? = nil,
        multiHost: Bool = false,
        simulatorNice: Int32 = 0,
        processLogs: String? = nil
    ) {
        self.simulatorProcess = simulatorProcess
        self.serviceUser = serviceUser
        self.multiHost = multiHost
        self.simulatorNice = simulatorNice
        self.processLogs = processLogs
    }
}

/// The processes of a field run: the service user's ids, and the simulator's process with its ports.
final class FieldProcesses: Sendable {
    struct Account: Sendable {
        let name: String
        let uid: uid_t
        let gid: gid_t
    }

    let account: Account?
    let simulatorPorts: APNsSimulator.Ports?
    /// The niceness the simulator's process runs at (``FieldPlan/simulatorNice``).
    let simulatorNice: Int32
    /// The simulator's event-loop threads (``FieldPlan/simulatorThreads``).
    let simulatorThreads: Int
    /// Where the simulator's process writes the chat notifications it accepts (``FieldPlan/recordChat``).
    let recordFile: String?
    /// Where the processes' output goes (``FieldPlan/processLogs``).
    let processLogs: String?
    /// The simulator's process (nil: the simulator runs in the bench's process).
    private let simulator: NIOLockedValueBox<Process?>
    private let simulatorPID: Int32?

    private init(
        account: Account?,
        simulator: Process?,
        ports: APNsSimulator.Ports?,
        recordFile: String? = nil,
        nice: Int32 = 0,
        threads: Int = 1,
        processLogs: String? = nil
    ) {
        self.account = account
        self.processLogs = processLogs
        self.simulatorNice = nice
        self.simulatorThreads = threads
        self.recordFile = recordFile
        self.simulator = NIOLockedValueBox(simulator)
        self.simulatorPID = simulator?.processIdentifier
        self.simulatorPorts = ports
    }

    /// Looks up the service user and starts the simulator's process, as `plan` asks; waits until its status page answers.
    static func start(
        _ plan: FieldPlan,
        binDir: String,
        certs: String,
        fcmAccountFile: String,
        fcmPort: Int,
        topics: [String]
    ) async throws -> FieldProcesses {
        var account: Account?
        if let name = plan.serviceUser {
            guard geteuid() == 0 else { throw SimulatorError(reason: "--service-user needs root (the processes drop to it)") }
            guard let entry = getpwnam(name) else { throw SimulatorError(reason: "--service-user \(name): no such user") }
            account = Account(name: name, uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid)
        }
        guard plan.simulatorProcess else {
            return FieldProcesses(account: account, simulator: nil, ports: nil, processLogs: plan.processLogs)
        }
        // Not root: as the others (the figures' header says which).
        let nice = plan.simulatorNice < 0 && geteuid() != 0 ? 0 : plan.simulatorNice
        let ports = APNsSimulator.Ports(
            gateway: try FreePort.loopback(),
            feedback: try FreePort.loopback(),
            http2: try FreePort.loopback(),
            status: try FreePort.loopback(),
            fcm: fcmPort
        )
        let field = FieldProcesses(account: account, simulator: nil, ports: nil, processLogs: plan.processLogs)
        let process = Process()
        var arguments = [
            "--certs", certs, "--gateway-port", "\(ports.gateway)", "--feedback-port", "\(ports.feedback)",
            "--http2-port", "\(ports.http2)", "--status-port", "\(ports.status ?? 0)",
            "--fcm-service-account", fcmAccountFile, "--fcm-port", "\(fcmPort)", "--log-level", "warning",
        ]
        if plan.simulatorThreads != 1 { arguments += ["--threads", "\(plan.simulatorThreads)"] }
        for topic in topics { arguments += ["--topic", topic] }
        var recordFile: String?
        if plan.recordChat {
            // Made here, writable by the service user the simulator runs as.
            let file = NSTemporaryDirectory() + "pushchat-bench-chat-\(getpid()).jsonl"
            guard FileManager.default.createFile(atPath: file, contents: nil) else {
                throw SimulatorError(reason: "cannot create \(file)")
            }
            if let account { _ = chown(file, account.uid, account.gid) }
            arguments += ["--record", file, "--record-tokens", Bench.chatTokenPrefix]
            recordFile = file
        }
        (process.executableURL, process.arguments) = field.command(binDir + "/pushchat-apns-sim", arguments)
        try field.attachOutput(of: process, named: "pushchat-apns-sim")
        try process.run()
        let started = FieldProcesses(
            account: account,
            simulator: process,
            ports: ports,
            recordFile: recordFile,
            nice: nice,
            threads: plan.simulatorThreads,
            processLogs: plan.processLogs
        )
        for _ in 0..<200 {
            if (try? await started.accepted()) != nil {
                // Every thread it has once it answers (its event loops among them): Linux keeps a niceness per thread,
                // and the threads Swift's runtime starts do not inherit the process's (`nice` would not reach them).
                if nice != 0 { try renice(process.processIdentifier, to: nice) }
                return started
            }
            guard process.isRunning else {
                throw SimulatorError(reason: "pushchat-apns-sim exited with status \(process.terminationStatus) at start")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        started.stop()
        throw SimulatorError(reason: "pushchat-apns-sim's status page did not answer within 10 s")
    }

    /// Sets the niceness of each of `pid`'s threads.
    private static func renice(_ pid: Int32, to nice: Int32) throws {
        let threads = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").compactMap { id_t($0) }
        for thread in threads where setpriority(__priority_which_t(PRIO_PROCESS.rawValue), thread, nice) != 0 {
            throw SimulatorError(reason: "cannot set the simulator's thread \(thread) to nice \(nice): \(String(cString: strerror(errno)))")
        }
    }

    /// Sends `process`'s output to `NAME.log` in ``processLogs`` (appended), or discards it.
    func attachOutput(of process: Process, named name: String) throws {
        guard let processLogs else {
            process.standardOutput = FileHandle.nullDevice
            return
        }
        let path = processLogs + "/" + name + ".log"
        if !FileManager.default.fileExists(atPath: path) {
            try FileManager.default.createDirectory(atPath: processLogs, withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: path, contents: nil) else { throw SimulatorError(reason: "cannot create \(path)") }
        }
        guard let file = FileHandle(forWritingAtPath: path) else { throw SimulatorError(reason: "cannot write \(path)") }
        file.seekToEndOfFile()
        process.standardOutput = file
        process.standardError = file
    }

    /// The command line that runs `executable` as the service user without capabilities (or as is).
    func command(_ executable: String, _ arguments: [String]) -> (URL, [String]) {
        guard let account else { return (URL(fileURLWithPath: executable), arguments) }
        let drop = [
            "--reuid=\(account.uid)", "--regid=\(account.gid)", "--init-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
        ]
        return (URL(fileURLWithPath: "/usr/bin/setpriv"), drop + [executable] + arguments)
    }

    /// What the simulator's process has accepted, from its status page; nil when the simulator runs in the bench.
    func accepted() async throws -> Int? { try await counters()?.accepted }

    /// The simulator's process's counters, from its status page; nil when the simulator runs in the bench.
    func counters() async throws -> SimulatorState.Counters? {
        guard let port = simulatorPorts?.status else { return nil }
        guard let body = try await LoadGenerator(port: port, connections: 1, duration: .zero).fetch(path: "/status.json") else {
            throw SimulatorError(reason: "the simulator's status page did not answer 200")
        }
        struct Status: Decodable { let counters: SimulatorState.Counters }
        return try JSONDecoder().decode(Status.self, from: Data(body.utf8)).counters
    }

    /// The delivery events the simulator's process took at `POST /webhooks`; nil when the simulator runs in the bench.
    func webhookEvents() async throws -> Int? {
        guard let port = simulatorPorts?.status else { return nil }
        guard let body = try await LoadGenerator(port: port, connections: 1, duration: .zero).fetch(path: "/status.json") else {
            throw SimulatorError(reason: "the simulator's status page did not answer 200")
        }
        struct Status: Decodable { let webhooks: WebhookInbox.Counters }
        return try JSONDecoder().decode(Status.self, from: Data(body.utf8)).webhooks.events
    }

    /// The chat notifications the simulator's process recorded: each one's payload and arrival.
    func recordedChat() throws -> [(payload: String, arrival: Date)] {
        guard let recordFile else { return [] }
        struct Line: Decodable {
            let time: String
            let payload: String
        }
        let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        let decoder = JSONDecoder()
        return try String(contentsOfFile: recordFile, encoding: .utf8).split(separator: "\n").map { text in
            let line = try decoder.decode(Line.self, from: Data(text.utf8))
            return (line.payload, try style.parse(line.time))
        }
    }

    /// The CPU the simulator has used: its process's, or the bench's own (the simulator and the delaying proxies).
    func simulatorCPUSeconds() -> Double {
        guard let simulatorPID else { return Bench.ownCPUSeconds() }
        return Bench.cpuSeconds(of: simulatorPID)
    }

    func stop() {
        if let recordFile { try? FileManager.default.removeItem(atPath: recordFile) }
        guard let process = simulator.withLockedValue({ $0 }) else { return }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}
