import Foundation
import Testing

@testable import Settings
@testable import Storage
@testable import Support

#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL cluster of the test's own (TLS on, as Debian's), which the fault tests stop and start under load
/// without disturbing the shared test server (`scripts/lib/postgres.sh` does the work, as for the shared one).
struct ScratchCluster: Sendable {
    let directory: String
    let port: Int

    /// The cluster's superuser URL for `database` (no `sslmode`: libpq's `prefer`, as the guide writes it).
    func url(database: String = "postgres") throws -> DatabaseURL {
        try DatabaseURL(parsing: "postgres://postgres@127.0.0.1:\(port)/\(database)")
    }

    /// Runs `body` with a new cluster holding a migrated database `pushchat`; removes the cluster afterwards.
    static func with<T: Sendable>(_ body: (ScratchCluster) async throws -> T) async throws -> T {
        let directory = TestDatabase.repositoryRoot.appendingPathComponent(".local/scratch-pg-\(UUID().uuidString.prefix(8))").path
        let output = try shell(". scripts/lib/postgres.sh && pg_start '\(directory)' tls >&2 && echo $PG_PORT")
        let cluster = ScratchCluster(directory: directory, port: Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0)
        defer { cluster.remove() }
        try await TestDatabase.admin(try cluster.url(), "CREATE DATABASE pushchat")
        try await TestDatabase.withConnection(try cluster.url(database: "pushchat")) { connection in
            let migrations = try Migration.load(from: TestDatabase.migrationsDirectory)
            try await Migrator(connection: connection, migrations: migrations, logger: TestDatabase.logger).migrate()
        }
        return try await body(cluster)
    }

    /// `pg_ctl stop -m fast`, as `systemctl restart postgresql` does: every session is ended at once.
    func stop() throws {
        _ = try Self.shell(". scripts/lib/postgres.sh && pg_stop '\(directory)'")
    }

    /// Starts it again on its port.
    func start() throws {
        _ = try Self.shell(". scripts/lib/postgres.sh && pg_restart '\(directory)' \(port) tls")
    }

    /// A streaming standby of this cluster (`pg_basebackup -R`, as the guide's HA section makes one), started on a
    /// port of its own; `remove()` it when done.
    func standby() throws -> ScratchCluster {
        let directory = self.directory + "-standby"
        let output = try Self.shell(
            ". scripts/lib/postgres.sh && bin=$(pg_bindir) && mkdir -p '\(directory)'"
                + " && if [ \"$(id -u)\" -eq 0 ]; then chown postgres: '\(directory)'; fi && chmod 700 '\(directory)'"
                + " && pg_as_owner \"$bin/pg_basebackup\" -h 127.0.0.1 -p \(port) -U postgres -D '\(directory)' -R -X stream --checkpoint=fast >&2"
                + " && pg_self_signed_certificate '\(directory)' >/dev/null && port=$(pg_free_port)"
                + " && pg_restart '\(directory)' $port tls && echo $port"
        )
        return ScratchCluster(directory: directory, port: Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0)
    }

    /// `pg_ctl promote`: a standby becomes a primary.
    func promote() throws {
        _ = try Self.shell(". scripts/lib/postgres.sh && pg_as_owner \"$(pg_bindir)/pg_ctl\" -D '\(directory)' -w promote >&2")
    }

    /// `pg_ctl stop -m immediate`: the server goes as a crashed machine's would, without a shutdown checkpoint.
    func crash() throws {
        _ = try Self.shell(". scripts/lib/postgres.sh && pg_as_owner \"$(pg_bindir)/pg_ctl\" -D '\(directory)' -m immediate -w stop >&2")
    }

    /// SIGSTOP to the server and its backends: a database that takes connections' bytes and never answers (a hung
    /// host); `resume()` sends SIGCONT.
    func freeze() throws {
        _ = try Self.shell("pid=$(head -n 1 '\(directory)/postmaster.pid'); kill -STOP $pid $(pgrep -P $pid)")
    }

    func resume() throws {
        _ = try Self.shell("pid=$(head -n 1 '\(directory)/postmaster.pid'); kill -CONT $pid $(pgrep -P $pid)")
    }

    func remove() {
        _ = try? Self.shell(". scripts/lib/postgres.sh && pg_stop '\(directory)'; rm -rf '\(directory)' '\(directory).tls'")
    }

    /// Runs a bash command in the repository root; its standard output, or an error with its standard error.
    @discardableResult
    static func shell(_ command: String) throws -> String {
        // Files, not pipes: the server it starts would hold a pipe open and the read would never end.
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("shell-\(UUID().uuidString)")
        let (outPath, errPath) = (base.path + ".out", base.path + ".err")
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        // Every descriptor above 2 closed first: Foundation learns of the child's exit through one, and a server
        // started here would inherit it and keep it open (waitUntilExit would never return).
        let closeInherited = "for fd in $(ls /proc/$$/fd); do [ \"$fd\" -gt 2 ] && eval \"exec $fd>&-\"; done 2>/dev/null;"
        process.arguments = ["-c", "\(closeInherited) (\(command)) >'\(outPath)' 2>'\(errPath)' </dev/null"]
        process.currentDirectoryURL = TestDatabase.repositoryRoot
        try process.run()
        process.waitUntilExit()
        let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
        guard process.terminationStatus == 0 else {
            throw ShellError(command: command, output: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
        }
        return out
    }

    struct ShellError: Error, CustomStringConvertible {
        let command: String
        let output: String
        var description: String { "\(command): \(output)" }
    }
}

/// Debian's PgBouncer in front of a cluster, in transaction pooling with a small pool and no special settings
/// (no `ignore_startup_parameters`), as many operators run it.
struct PgBouncer: Sendable {
    let port: Int
    let process: Process

    static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: "/usr/sbin/pgbouncer") }

    /// Runs `body` with PgBouncer on a free loopback port in front of `cluster`, `poolSize` server connections.
    static func with<T: Sendable>(front: ScratchCluster, poolSize: Int = 2, _ body: (PgBouncer) async throws -> T) async throws -> T {
        if geteuid() == 0 && ServiceUser.account == nil {
            try Test.cancel("PgBouncer refuses to run as root: needs \(ServiceUser.variable) (set by scripts/test.sh)")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pgbouncer-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = try FreePort.loopback()
        let ini = """
            [databases]
            * = host=127.0.0.1 port=\(front.port)
            [pgbouncer]
            listen_addr = 127.0.0.1
            listen_port = \(port)
            unix_socket_dir =
            auth_type = trust
            auth_file = \(directory.path)/users.txt
            pool_mode = transaction
            default_pool_size = \(poolSize)
            max_client_conn = 500
            """
        try ini.write(to: directory.appendingPathComponent("pgbouncer.ini"), atomically: true, encoding: .utf8)
        try "\"postgres\" \"\"\n".write(to: directory.appendingPathComponent("users.txt"), atomically: true, encoding: .utf8)
        for name in ["", "pgbouncer.ini", "users.txt"] {
            let path = name.isEmpty ? directory.path : directory.appendingPathComponent(name).path
            ServiceUser.own(path)
        }
        let process = Process()
        // PgBouncer refuses to run as root: it runs as the service user, as the executables do.
        let (executable, arguments) = ServiceUser.command(
            URL(fileURLWithPath: "/usr/sbin/pgbouncer"),
            [directory.appendingPathComponent("pgbouncer.ini").path]
        )
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            // SIGKILL: started from the test process, it inherits signal masks under which SIGTERM never arrives.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        let bouncer = PgBouncer(port: port, process: process)
        // Listening once a TCP connection is accepted.
        let deadline = ContinuousClock.now + .seconds(10)
        while !Self.accepts(port: port) {
            guard ContinuousClock.now < deadline, process.isRunning else {
                throw ScratchCluster.ShellError(command: "pgbouncer", output: "did not start listening on \(port)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try await body(bouncer)
    }

    /// Whether something accepts TCP connections on the loopback port.
    static func accepts(port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// The URL of `database` through the pooler.
    func url(database: String = "pushchat") throws -> DatabaseURL {
        try DatabaseURL(parsing: "postgres://postgres@127.0.0.1:\(port)/\(database)")
    }
}
