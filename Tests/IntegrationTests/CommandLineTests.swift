import Foundation
import PostgresNIO
import Testing

@testable import API
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Storage
@testable import Support

/// The executables as an operator runs them.
@Suite struct CommandLineTests {
    let api = Executable(name: "pushchat-api")

    @Test func aMissingSettingStopsWithOneLineNamingTheKey() throws {
        let result = try api.run(["development"], environment: ["PUSHCHAT_LOG_FILE": "-"])
        #expect(result.status == 78)
        let lines = result.standardError.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(lines.first?.contains("PUSHCHAT_DATABASE_URL") == true)
    }

    @Test func aMalformedSettingStopsWithOneLineNamingTheKey() throws {
        let result = try api.run(
            ["serve", "production"],
            environment: ["PUSHCHAT_DATABASE_URL": "postgres://u:pw@127.0.0.1/db", "PUSHCHAT_API_PORT": "http"]
        )
        #expect(result.status == 78)
        #expect(
            result.standardError
                == "pushchat-api: configuration error: PUSHCHAT_API_PORT: expected a port number from 0 to 65535, got 'http'\n"
        )
    }

    @Test func anUnknownModeIsRefused() throws {
        let result = try api.run(["staging"])
        #expect(result.status != 0)
        #expect(result.standardError.contains("staging"))
    }

    @Test func migrateAppliesThenReportsUpToDateAndStatus() async throws {
        try await TestDatabase.withEmptyDatabase { url in
            let environment = [
                "PUSHCHAT_DATABASE_URL": url.connectionString,
                "PUSHCHAT_MIGRATIONS_DIR": TestDatabase.migrationsDirectory,
            ]
            let first = try api.run(["migrate", "development"], environment: environment)
            #expect(first.status == 0, "\(first.standardError)")
            #expect(first.standardOutput.contains("applied 001_initial_schema.sql"))
            let second = try api.run(["migrate", "development"], environment: environment)
            #expect(second.standardOutput == "database is up to date\n")
            let status = try api.run(["migrate", "--status", "development"], environment: environment)
            #expect(status.standardOutput.hasPrefix("001_initial_schema.sql  applied "))
        }
    }

    /// `migrate --check`: a release fits a schema that has all its migrations, newer ones included (an older release
    /// after an upgrade, a rollback), and not one that lacks some.
    @Test func migrateCheckSaysWhetherThisReleaseAndTheSchemaGoTogether() async throws {
        try await TestDatabase.withEmptyDatabase { url in
            let all = try FileManager.default.contentsOfDirectory(atPath: TestDatabase.migrationsDirectory)
                .filter { $0.hasSuffix(".sql") }.sorted()
            // An older release: the migrations before the newest expand one (a contract migration is never pending for a
            // release: `migrate` leaves it for `--contract`).
            let newest = try #require(
                try all.last {
                    !(try String(contentsOfFile: TestDatabase.migrationsDirectory + "/" + $0, encoding: .utf8)).hasPrefix(
                        "-- pushchat:contract"
                    )
                }
            )
            let olderNames = all.prefix { $0 < newest }
            let older = NSTemporaryDirectory() + "pushchat-older-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: older, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: older) }
            for name in olderNames {
                try FileManager.default.copyItem(atPath: TestDatabase.migrationsDirectory + "/" + name, toPath: older + "/" + name)
            }
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: older)
            for name in olderNames {
                try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: older + "/" + name)
            }
            func run(_ arguments: [String], migrations: String) throws -> Executable.Result {
                try api.run(
                    arguments + ["development"],
                    environment: ["PUSHCHAT_DATABASE_URL": url.connectionString, "PUSHCHAT_MIGRATIONS_DIR": migrations]
                )
            }
            let empty = try run(["migrate", "--check"], migrations: TestDatabase.migrationsDirectory)
            #expect(empty.status == 1)
            #expect(empty.standardOutput.hasPrefix("behind: 001_initial_schema.sql"))
            #expect(try run(["migrate"], migrations: older).status == 0)
            let newerRelease = try run(["migrate", "--check"], migrations: TestDatabase.migrationsDirectory)
            #expect(newerRelease.status == 1, "the newest migration is pending for the newer release")
            #expect(newerRelease.standardOutput == "behind: \(newest) not applied: run migrate with this release before starting it\n")
            #expect(try run(["migrate"], migrations: TestDatabase.migrationsDirectory).status == 0)
            let current = try run(["migrate", "--check"], migrations: TestDatabase.migrationsDirectory)
            #expect(current.status == 0)
            #expect(current.standardOutput.hasPrefix("fits: the schema has every migration of this release (\(all.count))"))
            let olderRelease = try run(["migrate", "--check"], migrations: older)
            #expect(olderRelease.status == 0, "a rollback runs on the expanded schema")
            #expect(olderRelease.standardOutput.contains("and newer ones (\(newest))"))
            let status = try run(["migrate", "--status"], migrations: older)
            #expect(status.standardOutput.contains("\(newest)  applied "))
            #expect(status.standardOutput.contains("(no file: applied by a newer release)"))
        }
    }

    /// `migrate --contract` is the one-way step: without `--yes` it changes nothing, and says which migrations it
    /// would apply and that the releases before them stop fitting; with `--yes` it applies them.
    @Test func migrateContractNeedsYes() async throws {
        try await TestDatabase.withEmptyDatabase { url in
            let all = try Migration.load(from: TestDatabase.migrationsDirectory)
            let contracts = all.filter(\.isContract).map(\.fileName)
            try await TestDatabase.withConnection(url) { connection in
                _ = try await Migrator(connection: connection, migrations: all.filter { $0.version < 12 }, logger: TestDatabase.logger)
                    .migrate()
            }
            func run(_ arguments: [String]) throws -> Executable.Result {
                try api.run(
                    ["migrate"] + arguments + ["development"],
                    environment: [
                        "PUSHCHAT_DATABASE_URL": url.connectionString, "PUSHCHAT_MIGRATIONS_DIR": TestDatabase.migrationsDirectory,
                    ]
                )
            }
            #expect(try run([]).status == 0, "the expand migrations")
            let asked = try run(["--contract"])
            #expect(asked.status == 1)
            for name in contracts { #expect(asked.standardOutput.contains("\(name): releases from before it stop fitting"), "\(name)") }
            #expect(asked.standardOutput.contains("Nothing was changed: run it again with --yes"))
            let pending = try await TestDatabase.scalar(url, "SELECT count(*) FROM schema_migrations WHERE contract", as: Int64.self)
            #expect(pending == 0, "nothing applied")
            let applied = try run(["--contract", "--yes"])
            #expect(applied.status == 0, "\(applied.standardError)")
            for name in contracts { #expect(applied.standardOutput.contains("applied \(name)")) }
        }
    }

    /// A release started on a schema it does not fit ran and failed statement by statement. Now each service stops
    /// at once with exit 78 (systemd does not restart it) naming the migrations: behind (this release's newest is not
    /// applied) or removed (a newer release's contract migration took away what it uses).
    @Test func theServicesRefuseASchemaThatDoesNotFit() async throws {
        try await TestDatabase.withEmptyDatabase { url in
            let all = try Migration.load(from: TestDatabase.migrationsDirectory)
            let newest = try #require(all.last { !$0.isContract })
            try await TestDatabase.withConnection(url) { connection in
                _ = try await Migrator(
                    connection: connection,
                    migrations: all.filter { $0.version < newest.version },
                    logger: TestDatabase.logger
                ).migrate(contract: true)
            }
            let environment = [
                "PUSHCHAT_DATABASE_URL": url.connectionString, "PUSHCHAT_MIGRATIONS_DIR": TestDatabase.migrationsDirectory,
                "PUSHCHAT_APNS_GATEWAY": "127.0.0.1:1", "PUSHCHAT_APNS_FEEDBACK": "127.0.0.1:1",
                "PUSHCHAT_APNS_CERTIFICATE": TestCertificates.path("ck.pem"), "PUSHCHAT_API_PORT": "0",
            ]
            /// Runs `arguments` of `name` for at most 30 s (a service that does not stop would run on).
            func start(_ name: String, _ arguments: [String]) async throws -> (status: Int32, error: String) {
                let process = Executable(name: name).process(arguments + ["development"], environment: environment)
                let errors = Pipe()
                process.standardError = errors
                process.standardOutput = FileHandle.nullDevice
                try process.run()
                let deadline = ContinuousClock.now + .seconds(30)
                while process.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(100)) }
                if process.isRunning { process.terminate() }
                process.waitUntilExit()
                return (process.terminationStatus, String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
            }
            for (name, arguments) in [("pushchat-api", ["serve"]), ("pushchat-push", []), ("pushchat-feedback", [])] {
                let behind = try await start(name, arguments)
                #expect(behind.status == 78, "\(name): \(behind.error)")
                #expect(behind.error.contains("behind") && behind.error.contains(newest.fileName), "\(name): \(behind.error)")
            }
            try await TestDatabase.withConnection(url) { connection in
                _ = try await Migrator(connection: connection, migrations: all, logger: TestDatabase.logger).migrate(contract: true)
                try await connection.query(
                    "INSERT INTO schema_migrations (version, name, checksum, contract) VALUES (999, 'from_the_future', 'x', true)",
                    logger: TestDatabase.logger
                )
            }
            let removed = try await start("pushchat-push", [])
            #expect(removed.status == 78, "\(removed.error)")
            #expect(removed.error.contains("does not fit") && removed.error.contains("999_from_the_future.sql"), "\(removed.error)")
        }
    }

    @Test func migrateAgainstAnUnreachableDatabaseFailsClearly() throws {
        let result = try api.run(
            ["migrate", "development"],
            environment: [
                "PUSHCHAT_DATABASE_URL": "postgres://u:hunter2@127.0.0.1:1/db?sslmode=disable",
                "PUSHCHAT_MIGRATIONS_DIR": TestDatabase.migrationsDirectory,
            ]
        )
        #expect(result.status == 1)
        #expect(result.standardError.hasPrefix("pushchat-api migrate: connecting to postgres://u:***@127.0.0.1:1/db"))
        #expect(!result.standardError.contains("hunter2"))
    }
}
