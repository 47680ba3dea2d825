import APNs
package import Foundation
import Logging
package import PostgresNIO
import Settings
import Support

/// Applies numbered migrations in order, each inside its own transaction, and records them in `schema_migrations`.
/// Running it again applies nothing; two migrators running at once serialise on an advisory lock.
package struct Migrator: Sendable {
    /// The state of one migration file against the database.
    package struct Status: Sendable, Equatable {
        package let version: Int
        package let fileName: String
        /// When it was applied, or `nil` if pending.
        package let appliedAt: Date?
        /// The file changed after it was applied.
        package let modified: Bool
        /// False for a version the database records but this release has no file for (a newer release applied it).
        package var hasFile = true
        /// A contract migration (``Migration/isContract``): pending until `migrate --contract`.
        package var contract = false
    }

    /// Whether a release's binaries and the database's schema go together (`migrate --check`).
    package enum Fit: Sendable, Equatable {
        /// Every migration this release has is applied, and no other.
        case fits
        /// Every migration this release has is applied, and newer ones too: a newer release migrated. Its migrations
        /// only add (expand/contract), so this release still runs on the schema.
        case ahead([String])
        /// Migrations of this release are not applied yet: run `migrate`.
        case behind([String])
        /// A newer release's contract migrations removed or replaced what this release uses: it does not run on the
        /// schema (roll forward).
        case removed([String])

        /// The fit of the statuses `status()` returns. A pending contract migration does not hold a release back.
        package init(_ statuses: [Status]) {
            let pending = statuses.filter { $0.hasFile && $0.appliedAt == nil && !$0.contract }.map(\.fileName)
            let unknown = statuses.filter { !$0.hasFile }
            let removed = unknown.filter(\.contract).map(\.fileName)
            self =
                !pending.isEmpty
                ? .behind(pending)
                : !removed.isEmpty ? .removed(removed) : unknown.isEmpty ? .fits : .ahead(unknown.map(\.fileName))
        }
    }

    /// An arbitrary constant identifying PushChat's migration lock among advisory locks.
    static let lockKey: Int64 = 0x5055_5348_4348_4154

    let connection: PostgresConnection
    let migrations: [Migration]
    let logger: Logger

    /// How long a migration waits for a lock before it lets go and tries again (an open transaction in psql, a
    /// running service): a waiting `ALTER TABLE` would queue every other statement on the table behind it.
    let lockTimeout: Duration

    package init(connection: PostgresConnection, migrations: [Migration], lockTimeout: Duration = .seconds(5), logger: Logger) {
        self.connection = connection
        self.migrations = migrations
        self.lockTimeout = lockTimeout
        self.logger = logger
    }

    /// Applies every pending migration, in order; the contract ones (``Migration/isContract``) only with `contract` or
    /// on a database with no migrations yet (no release ran on it). Returns those applied.
    @discardableResult
    package func migrate(contract: Bool = false) async throws(DatabaseError) -> [Migration] {
        do {
            try await connection.query("SELECT pg_advisory_lock(\(Self.lockKey))", logger: logger)
            do {
                let applied = try await applyPending(on: connection, contract: contract)
                try await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                return applied
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                throw error
            }
        } catch let error as DatabaseError {
            throw error
        } catch {
            throw DatabaseError(code: .migrationFailed, context: "migrating the database", underlying: error)
        }
    }

    /// Every migration file, applied or pending, plus versions recorded in the database without a file.
    package func status() async throws(DatabaseError) -> [Status] {
        do {
            // Reads only (a role without rights on the schema may ask): no table yet means nothing applied.
            let exists = try await connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL", logger: logger)
            var tableExists = false
            for try await value in exists.decode(Bool.self) { tableExists = value }
            let applied = tableExists ? try await appliedMigrations(on: connection) : [:]
            var result = migrations.map { migration in
                let record = applied[migration.version]
                return Status(
                    version: migration.version,
                    fileName: migration.fileName,
                    appliedAt: record?.appliedAt,
                    modified: record.map { $0.checksum != migration.checksum } ?? false,
                    contract: migration.isContract
                )
            }
            for (version, record) in applied where !migrations.contains(where: { $0.version == version }) {
                result.append(
                    Status(
                        version: version,
                        fileName: "\(String(format: "%03d", version))_\(record.name).sql",
                        appliedAt: record.appliedAt,
                        modified: false,
                        hasFile: false,
                        contract: record.contract
                    )
                )
            }
            return result.sorted { $0.version < $1.version }
        } catch {
            throw DatabaseError(code: .queryFailed, context: "reading the migration status", underlying: error)
        }
    }

    private func createTable(on connection: PostgresConnection) async throws {
        try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            logger: logger
        )
        try await connection.query(
            "COMMENT ON TABLE schema_migrations IS 'Migrations from migrations/*.sql applied by pushchat-api migrate.'",
            logger: logger
        )
        // Added with the first contract migration: older releases' migrate neither reads nor writes it.
        try await connection.query(
            "ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS contract boolean NOT NULL DEFAULT false",
            logger: logger
        )
        try await connection.query(
            "COMMENT ON COLUMN schema_migrations.contract IS 'A contract migration (migrate --contract): releases from before it do not run on the schema.'",
            logger: logger
        )
    }

    private func appliedMigrations(
        on connection: PostgresConnection
    ) async throws -> [Int: (name: String, checksum: String, appliedAt: Date, contract: Bool)] {
        var applied: [Int: (name: String, checksum: String, appliedAt: Date, contract: Bool)] = [:]
        // `contract` through to_jsonb: a table an older release created has no such column until migrate runs.
        let rows = try await connection.query(
            "SELECT version, name, checksum, applied_at, coalesce((to_jsonb(m) ->> 'contract')::boolean, false) FROM schema_migrations m",
            logger: logger
        )
        for try await (version, name, checksum, appliedAt, contract) in rows.decode((Int, String, String, Date, Bool).self) {
            applied[version] = (name, checksum, appliedAt, contract)
        }
        return applied
    }

    private func applyPending(on connection: PostgresConnection, contract: Bool) async throws -> [Migration] {
        try await createTable(on: connection)
        let applied = try await appliedMigrations(on: connection)
        // No migration yet: no release ran on this database, so none needs what a contract migration removes.
        let contract = contract || applied.isEmpty
        var done: [Migration] = []
        for migration in migrations where applied[migration.version] == nil && (contract || !migration.isContract) {
            logger.info("Applying migration \(migration.fileName)")
            try await apply(migration, on: connection)
            done.append(migration)
        }
        return done
    }

    /// How often a migration is tried while a lock keeps it waiting.
    static let lockAttempts = 6

    /// Applies one migration: in a transaction, or statement by statement when its first lines say
    /// `-- pushchat:no-transaction` (`CREATE INDEX CONCURRENTLY`, which services may keep running beside, cannot run
    /// in a transaction; such statements must be safe to run again: `IF NOT EXISTS`). A lock it cannot get within
    /// `lockTimeout` rolls it back, and it is tried again after a pause, so migrate never queues the services'
    /// statements behind its own lock wait for long.
    private func apply(_ migration: Migration, on connection: PostgresConnection) async throws {
        var backoff = Backoff(initial: .seconds(1), maximum: .seconds(10))
        for attempt in 1...Self.lockAttempts {
            do {
                try await applyOnce(migration, on: connection)
                return
            } catch let error as DatabaseError where error.isLockTimeout && attempt < Self.lockAttempts {
                let delay = backoff.next()
                logger.warning(
                    "\(migration.fileName): a lock is held by another session (an open transaction in psql?); trying again in \(delay.formatted)"
                )
                try await Task.sleep(for: delay)
            }
        }
    }

    private func applyOnce(_ migration: Migration, on connection: PostgresConnection) async throws {
        let statements = SQLScript(migration.sql).statements
        let transactional = migration.isTransactional
        // Index builds may take long; the wait for a lock may not.
        try await connection.query("SET statement_timeout = 0", logger: logger)
        try await connection.query(PostgresQuery(unsafeSQL: "SET lock_timeout = \(lockTimeout.milliseconds)"), logger: logger)
        if transactional { try await connection.query("BEGIN", logger: logger) }
        var current = 0
        do {
            for (index, statement) in statements.enumerated() {
                current = index + 1
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            let record: PostgresQuery = """
                INSERT INTO schema_migrations (version, name, checksum, contract)
                VALUES (\(migration.version), \(migration.name), \(migration.checksum), \(migration.isContract))
                """
            try await connection.query(record, logger: logger)
            if transactional { try await connection.query("COMMIT", logger: logger) }
        } catch {
            if transactional { await connection.rollBack(logger: logger) }
            throw DatabaseError(
                code: .migrationFailed,
                context: "\(migration.fileName), statement \(current) of \(statements.count)" + (transactional ? " (rolled back)" : ""),
                underlying: error
            )
        }
    }
}
