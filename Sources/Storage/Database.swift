import APNs
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Settings
import Support

/// Opening PostgreSQL connections from a ``DatabaseURL``.
public enum Database {
    /// A pool of `url.connections` connections; run it (it is a `Service`) for as long as it is used.
    ///
    /// A long-running process (`keepOpen`: the API, the push daemon) opens them all at start and keeps them. A pool
    /// that opens connections on demand arms an idle timer (a sleeping task) each time one of them goes idle and
    /// cancels it at the next lease, and a cancelled `Task.sleep` keeps its memory until its deadline
    /// (swiftlang/swift#60441): at 1,400 requests/s the API held 84,000 such timers, 62 MB, and their long-lived
    /// blocks among the requests' short-lived ones fragmented the heap until its resident set had grown by 33 MB.
    /// Kept-open connections have no idle timer. A short job (`keepOpen` false) opens them as it needs them.
    public static func makeClient(url: DatabaseURL, applicationName: String, keepOpen: Bool, logger: Logger) -> PostgresClient {
        PostgresClient(
            configuration: url.clientConfiguration(applicationName: applicationName, keepOpen: keepOpen),
            backgroundLogger: logger
        )
    }

    @discardableResult
    /// One connection for a short command (migrate, admin tools): fails at once when the server cannot be reached,
    /// and is closed when `body` returns.
    public static func withConnection<T: Sendable>(
        url: DatabaseURL,
        applicationName: String,
        logger: Logger,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(
                configuration: try url.connectionConfiguration(applicationName: applicationName),
                id: 1,
                logger: logger
            )
        } catch {
            throw DatabaseError(context: "connecting to \(url)", underlying: error)
        }
        do {
            let result = try await body(connection)
            try? await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }
}

extension DatabaseURL {
    /// A connection pool's configuration for this URL; `applicationName` shows in `pg_stat_activity`.
    func clientConfiguration(applicationName: String, keepOpen: Bool) -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        switch endpoint {
        case .socket(let path):
            configuration = .init(unixSocketPath: path, username: username, password: password, database: database)
        case .tcp(let host, let port, let tls):
            let mode: PostgresClient.Configuration.TLS =
                switch tls {
                case .none: .disable
                case .prefer(let tls): .prefer(tls)
                case .require(let tls): .require(tls)
                }
            configuration = .init(host: host, port: port, username: username, password: password, database: database, tls: mode)
        }
        configuration.options.additionalStartupParameters = sessionParameters(applicationName: applicationName)
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.keepAliveBehavior = nil
        configuration.options.maximumConnections = connections
        configuration.options.minimumConnections = keepOpen ? connections : 0
        return configuration
    }

    /// A single connection's configuration (see ``Database/withConnection(url:applicationName:logger:_:)``).
    func connectionConfiguration(applicationName: String) throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        switch endpoint {
        case .socket(let path):
            configuration = .init(unixSocketPath: path, username: username, password: password, database: database)
        case .tcp(let host, let port, let tls):
            let mode: PostgresConnection.Configuration.TLS =
                switch tls {
                case .none: .disable
                case .prefer(let tls): .prefer(try .init(configuration: tls))
                case .require(let tls): .require(try .init(configuration: tls))
                }
            configuration = .init(host: host, port: port, username: username, password: password, database: database, tls: mode)
        }
        configuration.options.additionalStartupParameters = sessionParameters(applicationName: applicationName)
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }

    /// Sent when a session starts: its name in `pg_stat_activity`, and the statement and lock timeouts (in ms).
    func sessionParameters(applicationName: String) -> [(String, String)] {
        [
            ("application_name", applicationName),
            ("statement_timeout", "\(statementTimeout.milliseconds)"),
            ("lock_timeout", "\(lockTimeout.milliseconds)"),
        ]
    }

    /// Where and how to connect, decided once from the URL for both configurations above.
    enum Target {
        enum TLS {
            case none
            /// TLS when the server offers it (libpq's `allow` and `prefer`).
            case prefer(TLSConfiguration)
            case require(TLSConfiguration)
        }

        case socket(path: String)
        case tcp(host: String, port: Int, tls: TLS)
    }

    var endpoint: Target {
        if let socketDirectory { return .socket(path: "\(socketDirectory)/.s.PGSQL.\(port)") }
        guard let tls = tlsConfiguration, tlsMode != .disable else { return .tcp(host: host, port: port, tls: .none) }
        switch tlsMode {
        case .disable: return .tcp(host: host, port: port, tls: .none)
        case .allow, .prefer: return .tcp(host: host, port: port, tls: .prefer(tls))
        case .require, .verifyCA, .verifyFull: return .tcp(host: host, port: port, tls: .require(tls))
        }
    }
}
