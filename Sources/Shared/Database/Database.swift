import Logging
import NIOCore
import PostgresNIO

/// Opening PostgreSQL connections from a ``DatabaseURL``.
public enum Database {
    /// A connection pool for a long-running service; run it (it is a `Service`) for as long as it is used.
    public static func makeClient(url: DatabaseURL, applicationName: String, logger: Logger) -> PostgresClient {
        PostgresClient(configuration: url.clientConfiguration(applicationName: applicationName), backgroundLogger: logger)
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
    /// A single-connection configuration (see ``Database/withConnection(url:applicationName:logger:_:)``).
    func connectionConfiguration(applicationName: String) throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        if let socketDirectory {
            configuration = .init(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)",
                username: username,
                password: password,
                database: database
            )
        } else {
            let tls: PostgresConnection.Configuration.TLS
            switch (tlsMode, tlsConfiguration) {
            case (.disable, _), (_, nil): tls = .disable
            case (.allow, let configuration?), (.prefer, let configuration?): tls = .prefer(try .init(configuration: configuration))
            case (_, let configuration?): tls = .require(try .init(configuration: configuration))
            }
            configuration = .init(host: host, port: port, username: username, password: password, database: database, tls: tls)
        }
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }
}
