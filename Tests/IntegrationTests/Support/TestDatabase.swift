import Foundation
import Logging
import PostgresNIO
import Synchronization
import Testing

@testable import API
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Storage
@testable import Support

/// Fresh, migrated PostgreSQL databases for integration tests, one per test, so parallel tests never see each
/// other's rows (or NOTIFYs). The server comes from `PUSHCHAT_TEST_DATABASE_URL`, which `scripts/test.sh` sets.
enum TestDatabase {
    static let variable = "PUSHCHAT_TEST_DATABASE_URL"

    static var logger: Logger {
        var logger = Logger(label: "test")
        logger.logLevel = ProcessInfo.processInfo.environment["PUSHCHAT_TEST_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
        return logger
    }

    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
    }

    static var migrationsDirectory: String { repositoryRoot.appendingPathComponent("migrations").path }

    /// The server's maintenance database URL.
    /// Without it (`swift test` alone, the unit tests' command) a test that needs PostgreSQL is skipped, not failed:
    /// one line says why, once; `scripts/test.sh` runs everything.
    static func serverURL() throws -> DatabaseURL {
        guard let text = ProcessInfo.processInfo.environment[variable], !text.isEmpty else {
            if skipNoticeGiven.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged {
                FileHandle.standardError.write(
                    Data("\(variable) is not set: the tests that need PostgreSQL are skipped (scripts/test.sh runs them)\n".utf8)
                )
            }
            try Test.cancel("needs PostgreSQL (\(variable) is not set)")
        }
        return try DatabaseURL(parsing: text, key: variable)
    }

    private static let skipNoticeGiven = Atomic(false)

    /// Runs `body` with the URL of a new database holding the migrated schema; drops the database afterwards.
    static func withFreshDatabase<T: Sendable>(_ body: (DatabaseURL) async throws -> T) async throws -> T {
        let server = try serverURL()
        let template = try await TemplateDatabase.shared.name(server: server)
        return try await withNewDatabase(prefix: "pushchat_test", template: template, body)
    }

    /// An empty database (no schema), for migration tests.
    static func withEmptyDatabase<T: Sendable>(_ body: (DatabaseURL) async throws -> T) async throws -> T {
        try await withNewDatabase(prefix: "pushchat_empty", template: nil, body)
    }

    private static func withNewDatabase<T: Sendable>(
        prefix: String,
        template: String?,
        _ body: (DatabaseURL) async throws -> T
    ) async throws -> T {
        let server = try serverURL()
        let name = "\(prefix)_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased())"
        try await admin(server, "CREATE DATABASE \(name)" + (template.map { " TEMPLATE \($0)" } ?? ""))
        do {
            let result = try await body(server.with(database: name))
            try await admin(server, "DROP DATABASE \(name) WITH (FORCE)")
            return result
        } catch {
            try? await admin(server, "DROP DATABASE \(name) WITH (FORCE)")
            throw error
        }
    }

    /// The role the services connect as in tests (``service(_:)``): what `deploy/grants.sql` gives the production
    /// services' role, no more, so a statement the services' role may not run fails a test as it would fail in the
    /// field (the deployment test found such a statement once, after every other test had passed as the owner).
    static let serviceRole = "pushchat_test_service"

    /// `url` as the services' role: for the API and the daemons a test runs. Migrations, `keys`, `apps` and the
    /// tests' own queries keep the owner's.
    static func service(_ url: DatabaseURL) -> DatabaseURL {
        var url = url
        url.username = serviceRole
        url.password = nil
        return url
    }

    /// Creates the services' role (the cluster's; once) and runs `deploy/grants.sql` for it in `database`, as the
    /// guide does after `migrate`: its `pushchat_owner` is the role that migrated (the server URL's), its `pushchat`
    /// the services' role. A database made from this template keeps the grants.
    static func grantServiceRole(server: DatabaseURL, database: String) async throws {
        try await admin(
            server,
            "DO $$ BEGIN CREATE ROLE \(serviceRole) LOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
        )
        let grants = try String(contentsOf: repositoryRoot.appendingPathComponent("deploy/grants.sql"), encoding: .utf8)
            .replacingOccurrences(of: "DATABASE pushchat ", with: "DATABASE \(database) ")
            .replacingOccurrences(of: "pushchat_owner", with: server.username)
            .replacingOccurrences(of: " pushchat;", with: " \(serviceRole);")
        try await withConnection(server.with(database: database)) { connection in
            for statement in SQLScript(grants).statements {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
        }
    }

    /// `url` reached through a loopback proxy listening on `port`.
    static func through(_ url: DatabaseURL, port: Int) -> DatabaseURL {
        var proxied = url
        proxied.host = "127.0.0.1"
        proxied.port = port
        proxied.socketDirectory = nil
        return proxied
    }

    /// Runs `body` on one connection to `url`.
    @discardableResult
    static func withConnection<T: Sendable>(_ url: DatabaseURL, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await Database.withConnection(url: url, applicationName: "pushchat-tests", logger: logger, body)
    }

    static func admin(_ server: DatabaseURL, _ sql: String) async throws {
        try await withConnection(server) { connection in
            try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
        }
    }

    /// One value from a query.
    static func scalar<T: PostgresDecodable & Sendable>(
        _ url: DatabaseURL,
        _ query: PostgresQuery,
        as type: T.Type = T.self
    ) async throws -> T {
        try await withConnection(url) { connection in
            let rows = try await connection.query(query, logger: logger)
            for try await value in rows.decode(T.self) { return value }
            throw DatabaseError(code: .queryFailed, context: "test query", reason: "no rows")
        }
    }
}

/// The migrated template every test database is copied from, created once per test process.
actor TemplateDatabase {
    static let shared = TemplateDatabase()
    private var created: Task<String, any Error>?

    func name(server: DatabaseURL) async throws -> String {
        if let created { return try await created.value }
        let task = Task<String, any Error> {
            try await Self.dropStale(server: server)
            let name = "pushchat_template_\(getpid())_\(UInt32.random(in: 0...UInt32.max))"
            try await TestDatabase.admin(server, "CREATE DATABASE \(name)")
            try await TestDatabase.withConnection(server.with(database: name)) { connection in
                let migrations = try Migration.load(from: TestDatabase.migrationsDirectory)
                try await Migrator(connection: connection, migrations: migrations, logger: TestDatabase.logger).migrate()
            }
            try await TestDatabase.grantServiceRole(server: server, database: name)
            return name
        }
        created = task
        return try await task.value
    }

    /// Drops the templates of test processes that are gone (nothing drops a template when its process ends, so a
    /// developer's cluster gained one per `swift test`); a live process's template, in use or not, is left alone.
    private static func dropStale(server: DatabaseURL) async throws {
        let names = try await TestDatabase.withConnection(server) { connection in
            var names: [String] = []
            let rows = try await connection.query(
                "SELECT datname FROM pg_database WHERE datname LIKE 'pushchat\\_template\\_%'",
                logger: TestDatabase.logger
            )
            for try await name in rows.decode(String.self) { names.append(name) }
            return names
        }
        for name in names {
            let parts = name.split(separator: "_")
            guard parts.count == 4, let pid = pid_t(parts[2]), kill(pid, 0) != 0, errno == ESRCH else { continue }
            try await TestDatabase.admin(server, "DROP DATABASE IF EXISTS \(name)")
        }
    }
}

extension TestDatabase {
    /// A feedback store on a pool of its own over `url`, for as long as `body` runs.
    static func withFeedbackStore<T: Sendable>(_ url: DatabaseURL, _ body: (FeedbackStore) async throws -> T) async throws -> T {
        let client = Database.makeClient(url: url, applicationName: "pushchat-tests", keepOpen: false, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            return try await body(FeedbackStore(client: client, logger: logger))
        }
    }

    /// A ``DatabaseClient`` on `url` for `body` (the API's and the daemon's stores run on one).
    static func withDatabaseClient<T: Sendable>(_ url: DatabaseURL, _ body: (DatabaseClient) async throws -> T) async throws -> T {
        let database = DatabaseClient(url: url, applicationName: "pushchat-tests", keepOpen: false, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await database.run() }
            defer { group.cancelAll() }
            try await database.waitForPool()
            return try await body(database)
        }
    }
}
