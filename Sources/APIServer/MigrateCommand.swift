import API
import APNs
import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import Settings
import Storage
import Support

/// `pushchat-api migrate [mode] [--status | --check]`: applies `migrations/*.sql` in order, lists their state, or says
/// whether this release and the schema go together.
struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply pending database migrations (each in its own transaction), or show their status."
    )

    @OptionGroup var options: ProcessOptions

    @Flag(name: .long, help: "List every migration and whether it is applied; change nothing.")
    var status = false

    @Flag(
        name: .long,
        help:
            "Say whether this release's binaries and the schema go together: exit 0 when every migration of this release is applied (the schema may be newer: migrations only add), 1 when some are pending; change nothing."
    )
    var check = false

    @Flag(
        name: .long,
        help:
            "Also apply the contract migrations, which remove or replace what older releases use: run it once the upgrade is done and no rollback to a release from before them will be needed (a fresh database gets them without it)."
    )
    var contract = false

    @Flag(
        name: .long,
        help: "With --contract: yes, apply the contract migrations (without it, --contract only says what they make irreversible)."
    )
    var yes = false

    @OptionGroup var owner: RoleOption

    func run() async throws {
        try await ProcessFailure.report(program: "pushchat-api migrate") {
            let configuration = try options.configuration()
            var logger = Logger(label: "pushchat-api")
            logger.logLevel = .error
            let migrations = try Migration.load(from: configuration.migrationsDirectory)
            try await Database.withConnection(url: configuration.databaseURL, applicationName: "pushchat-migrate", logger: logger) {
                connection in
                try await owner.apply(to: connection, logger: logger)
                let migrator = Migrator(connection: connection, migrations: migrations, logger: logger)
                if status {
                    for entry in try await migrator.status() {
                        let state =
                            entry.appliedAt.map { "applied \(Self.format($0))" }
                            ?? (entry.contract ? "pending (contract: migrate --contract)" : "pending")
                        let note = entry.hasFile ? "" : "  (no file: applied by a newer release)"
                        print("\(entry.fileName)  \(state)\(entry.modified ? "  (file changed since it was applied)" : "")\(note)")
                    }
                } else if check {
                    let statuses = try await migrator.status()
                    for entry in statuses where entry.modified {
                        print("warning: \(entry.fileName) changed since it was applied")
                    }
                    switch Migrator.Fit(statuses) {
                    case .fits:
                        print("fits: the schema has every migration of this release (\(statuses.count)) and no other")
                    case .ahead(let newer):
                        print(
                            "fits: the schema has every migration of this release, and newer ones (\(newer.joined(separator: ", "))) "
                                + "that only add: this release runs on it"
                        )
                    case .behind(let pending):
                        print("behind: \(pending.joined(separator: ", ")) not applied: run migrate with this release before starting it")
                        throw ExitCode(1)
                    case .removed(let newer):
                        print(
                            "does not fit: a newer release's contract migrations (\(newer.joined(separator: ", "))) removed what this release uses: roll forward"
                        )
                        throw ExitCode(1)
                    }
                    let waiting = statuses.filter { $0.contract && $0.hasFile && $0.appliedAt == nil }.map(\.fileName)
                    if !waiting.isEmpty {
                        print(
                            "contract pending: \(waiting.joined(separator: ", ")) (migrate --contract, once no release from before this one will run again)"
                        )
                    }
                } else {
                    if contract && !yes {
                        let statuses = try await migrator.status()
                        let waiting = statuses.filter { $0.contract && $0.hasFile && $0.appliedAt == nil }
                        // A fresh database gets them anyway (no release ran on it): nothing one-way to confirm.
                        if !waiting.isEmpty && statuses.contains(where: { $0.appliedAt != nil }) {
                            print("migrate --contract is one-way: it would apply")
                            for entry in waiting {
                                print(
                                    "  \(entry.fileName): releases from before it stop fitting the schema (their migrate --check says does not fit)"
                                )
                            }
                            print(
                                "No rollback to such a release is possible afterwards (the guide's section 16 says which steps can be undone)."
                            )
                            print("Nothing was changed: run it again with --yes to apply them.")
                            throw ExitCode(1)
                        }
                    }
                    let applied = try await migrator.migrate(contract: contract)
                    for migration in applied { print("applied \(migration.fileName)") }
                    let url = configuration.databaseURL
                    if let warning = await migrator.setSessionDefaults(statementTimeout: url.statementTimeout, lockTimeout: url.lockTimeout)
                    {
                        FileHandle.standardError.write(Data("pushchat-api migrate: warning: \(warning)\n".utf8))
                    }
                    print(applied.isEmpty ? "database is up to date" : "\(applied.count) migration(s) applied")
                    let waiting = try await migrator.status().filter { $0.contract && $0.hasFile && $0.appliedAt == nil }
                    if !waiting.isEmpty {
                        print(
                            "contract pending: \(waiting.map(\.fileName).joined(separator: ", ")): run migrate --contract once no release from before this one will run again"
                        )
                    }
                }
            }
        }
    }

    static func format(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}
