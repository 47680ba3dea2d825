import Logging
import PostgresNIO
import Settings
import Support

extension Migrator {
    /// Makes the configured timeouts the database's defaults (`ALTER DATABASE … SET`), so that sessions reach them
    /// even through a pooler in transaction mode, which cannot pass them at start-up (see ``DatabaseSession``).
    /// Direct sessions still send their own. Needs the database's owner (the guide's `--role pushchat_owner`);
    /// returns a warning to print instead of failing when it is not.
    package func setSessionDefaults(statementTimeout: Duration, lockTimeout: Duration) async -> String? {
        // Integers formatted by us, not text from outside: the statement is built with format()'s %I for the name.
        let sql = """
            DO $$ BEGIN
                EXECUTE format('ALTER DATABASE %I SET statement_timeout = %L', current_database(), '\(statementTimeout.milliseconds)ms');
                EXECUTE format('ALTER DATABASE %I SET lock_timeout = %L', current_database(), '\(lockTimeout.milliseconds)ms');
            END $$
            """
        do {
            try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
            return nil
        } catch {
            return "could not set the database's default timeouts (\(DatabaseError.describe(error))): "
                + "through a pooler, sessions get no statement_timeout; run migrate as the database's owner"
        }
    }
}
