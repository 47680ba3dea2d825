package import Logging
package import Settings
package import Support

/// The check every service makes as it starts: does the schema fit this release's migrations (`migrate --check`)?
/// A release started on a schema it does not fit ran and failed statement by statement; now it stops at once with
/// exit 78 (systemd does not restart it) and names the migrations. A database that does not answer is not a reason to
/// stop (the services ride out outages): the check is then skipped with a warning.
package enum SchemaFitCheck {
    /// How long the check waits for the database before it lets the service start unchecked.
    static let timeout: Duration = .seconds(10)

    package static func require(_ configuration: Configuration, program: String, logger: Logger) async throws(SchemaMismatch) {
        let migrations: [Migration]
        do {
            migrations = try Migration.load(from: configuration.migrationsDirectory)
        } catch {
            logger.warning(
                "The schema was not checked: cannot read this release's migrations in \(configuration.migrationsDirectory) (migrations_dir)"
            )
            return
        }
        let fit: Migrator.Fit
        do {
            fit = try await withThrowingTaskGroup(of: Migrator.Fit?.self) { group in
                group.addTask {
                    try await Database.withConnection(url: configuration.databaseURL, applicationName: program, logger: logger) {
                        connection in
                        Migrator.Fit(try await Migrator(connection: connection, migrations: migrations, logger: logger).status())
                    }
                }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let fit = first else { throw CancellationError() }
                return fit
            }
        } catch {
            logger.warning(
                "The schema was not checked: the database did not answer within \(timeout.formatted) (\(DatabaseError.describe(error)))"
            )
            return
        }
        switch fit {
        case .fits, .ahead:
            logger.debug("The schema fits this release")
        case .behind(let pending):
            throw SchemaMismatch(
                reason: "the schema is behind this release: \(pending.joined(separator: ", ")) not applied "
                    + "(run pushchat-api migrate with this release first)"
            )
        case .removed(let newer):
            throw SchemaMismatch(
                reason: "the schema does not fit this release: a newer release's contract migrations "
                    + "(\(newer.joined(separator: ", "))) removed what it uses (roll forward)"
            )
        }
    }
}

/// The schema does not fit the release that is starting: restarting cannot help (exit 78).
package struct SchemaMismatch: PushChatError {
    package typealias Code = ErrorCode<SchemaMismatch>
    package var code: Code { .mismatch }
    package let reason: String
    package var description: String { reason }
    package var exitStatus: Int32 { 78 }
}

extension ErrorCode where Domain == SchemaMismatch {
    package static let mismatch = Self("mismatch")
}
