import API
import APNs
import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import Settings
import Storage
import Support

/// `pushchat-api migrate [mode] [--status]`: applies `migrations/*.sql` in order, or lists their state.
struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply pending database migrations (each in its own transaction), or show their status."
    )

    @OptionGroup var options: ProcessOptions

    @Flag(name: .long, help: "List every migration and whether it is applied; change nothing.")
    var status = false

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
                        let state = entry.appliedAt.map { "applied \(Self.format($0))" } ?? "pending"
                        print("\(entry.fileName)  \(state)\(entry.modified ? "  (file changed since it was applied)" : "")")
                    }
                } else {
                    let applied = try await migrator.migrate()
                    for migration in applied { print("applied \(migration.fileName)") }
                    let url = configuration.databaseURL
                    if let warning = await migrator.setSessionDefaults(statementTimeout: url.statementTimeout, lockTimeout: url.lockTimeout)
                    {
                        FileHandle.standardError.write(Data("pushchat-api migrate: warning: \(warning)\n".utf8))
                    }
                    print(applied.isEmpty ? "database is up to date" : "\(applied.count) migration(s) applied")
                }
            }
        }
    }

    static func format(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}
