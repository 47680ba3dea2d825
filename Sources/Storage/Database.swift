import APNs
package import Logging
import NIOCore
import NIOSSL
package import PostgresNIO
package import Settings
import Support

/// Opening PostgreSQL connections from a ``DatabaseURL``.
package enum Database {
    /// A pool of `url.connections` connections; run it (it is a `Service`) for as long as it is used.
    ///
    /// A long-running process (`keepOpen`: the API, the push daemon) opens them all at start and keeps them. A pool
    /// that opens connections on demand arms an idle timer (a sleeping task) each time one of them goes idle and
    /// cancels it at the next lease, and a cancelled `Task.sleep` keeps its memory until its deadline
    /// (swiftlang/swift#60441): at 1,400 requests/s the API held 84,000 such timers, 62 MB, and their long-lived
    /// blocks among the requests' short-lived ones fragmented the heap until its resident set had grown by 33 MB.
    /// Kept-open connections have no idle timer. A short job (`keepOpen` false) opens them as it needs them.
    package static func makeClient(
        url: DatabaseURL,
        route: DatabaseSession.Route = .direct,
        applicationName: String,
        keepOpen: Bool,
        logger: Logger
    ) -> PostgresClient {
        PostgresClient(
            configuration: url.clientConfiguration(route: route, applicationName: applicationName, keepOpen: keepOpen),
            backgroundLogger: logger
        )
    }

    @discardableResult
    /// One connection for a short command (migrate, admin tools): fails at once when the server cannot be reached,
    /// and is closed when `body` returns. Without a `route`, a connection a pooler refuses for its start-up
    /// parameters is opened again without them (see ``DatabaseSession``).
    package static func withConnection<T: Sendable>(
        url: DatabaseURL,
        route: DatabaseSession.Route? = nil,
        applicationName: String,
        logger: Logger,
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withChosenConnection(url: url, route: route, applicationName: applicationName, logger: logger) { connection, _ in
            try await body(connection)
        }
    }

    /// ``withConnection(url:route:applicationName:logger:_:)`` that also tells `body` which of the URL's hosts it is on
    /// (the URL of that host alone).
    package static func withChosenConnection<T: Sendable>(
        url: DatabaseURL,
        route: DatabaseSession.Route? = nil,
        applicationName: String,
        logger: Logger,
        _ body: (PostgresConnection, DatabaseURL) async throws -> T
    ) async throws -> T {
        let connection: PostgresConnection
        let chosen: DatabaseURL
        do {
            (connection, chosen) = try await connectChoosing(
                url: url,
                route: route ?? .direct,
                applicationName: applicationName,
                logger: logger
            )
        } catch let error as DatabaseError where route == nil && error.reason.contains("unsupported startup parameter") {
            (connection, chosen) = try await connectChoosing(url: url, route: .pooled, applicationName: applicationName, logger: logger)
        }
        do {
            let result = try await body(connection, chosen)
            try? await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// Connects to the first of `url`'s hosts that answers and is what its `target_session_attrs` asks, in libpq's
    /// order and meaning (see ``DatabaseURL``); with one host and `any`, to that host. Returns the connection and the
    /// URL of the host chosen. No host that fits: an `unavailable` error naming what each host was.
    static func connectChoosing(
        url: DatabaseURL,
        route: DatabaseSession.Route,
        applicationName: String,
        logger: Logger
    ) async throws -> (PostgresConnection, DatabaseURL) {
        let timeout = url.connectTimeout ?? .seconds(5)
        guard url.choosesHost else {
            return (
                try await connect(url: url, route: route, applicationName: applicationName, connectTimeout: timeout, logger: logger), url
            )
        }
        let hosts = url.loadBalanceHosts ? url.hosts.shuffled() : url.hosts
        let wanted = url.targetSessionAttributes
        var reasons: [String] = []
        // prefer-standby: a standby first, else any host that answers.
        for attributes in wanted == .preferStandby ? [.standby, .any] : [wanted] {
            for host in hosts {
                let candidate = url.on(host)
                let connection: PostgresConnection
                do {
                    connection = try await connect(
                        url: candidate,
                        route: route,
                        applicationName: applicationName,
                        connectTimeout: timeout,
                        logger: logger
                    )
                } catch let error as DatabaseError where error.reason.contains("unsupported startup parameter") {
                    throw error  // a pooler: the caller tries again without the parameters
                } catch {
                    if attributes == wanted || wanted != .preferStandby { reasons.append("\(host): \(DatabaseError.describe(error))") }
                    continue
                }
                do {
                    if try await session(connection, is: attributes, logger: logger) { return (connection, candidate) }
                    reasons.append("\(host): not \(attributes.rawValue)")
                } catch {
                    reasons.append("\(host): \(DatabaseError.describe(error))")
                }
                _ = try? await connection.close()
            }
        }
        throw DatabaseError(
            code: .unavailable,
            context: "connecting to \(url)",
            reason: "no host is \(wanted.rawValue) (\(reasons.joined(separator: "; ")))"
        )
    }

    /// Whether the session on `connection` is what `attributes` asks (libpq: `read-write` and `read-only` by
    /// `transaction_read_only`, `primary` and `standby` by `pg_is_in_recovery()`).
    package static func session(
        _ connection: PostgresConnection,
        is attributes: DatabaseURL.TargetSessionAttributes,
        logger: Logger
    )
        async throws -> Bool
    {
        guard attributes != .any else { return true }
        let rows = try await connection.query("SELECT current_setting('transaction_read_only'), pg_is_in_recovery()", logger: logger)
        for try await (readOnly, recovery) in rows.decode((String, Bool).self) {
            switch attributes {
            case .any: return true
            case .readWrite: return readOnly == "off"
            case .readOnly: return readOnly == "on"
            case .primary: return !recovery
            case .standby, .preferStandby: return recovery
            }
        }
        return false
    }

    static func connect(
        url: DatabaseURL,
        route: DatabaseSession.Route,
        applicationName: String,
        connectTimeout: Duration = .seconds(5),
        logger: Logger
    ) async throws -> PostgresConnection {
        do {
            var configuration = try url.connectionConfiguration(route: route, applicationName: applicationName)
            configuration.options.connectTimeout = .nanoseconds(connectTimeout.nanoseconds)
            return try await PostgresConnection.connect(
                configuration: configuration,
                id: 1,
                logger: logger
            )
        } catch {
            throw DatabaseError(context: "connecting to \(url)", underlying: error)
        }
    }
}

extension DatabaseURL {
    /// A connection pool's configuration for this URL; `applicationName` shows in `pg_stat_activity`.
    func clientConfiguration(route: DatabaseSession.Route, applicationName: String, keepOpen: Bool) -> PostgresClient.Configuration {
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
        configuration.options.additionalStartupParameters = DatabaseSession.parameters(self, route: route, applicationName: applicationName)
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.keepAliveBehavior = nil
        configuration.options.maximumConnections = connections
        configuration.options.minimumConnections = keepOpen ? connections : 0
        return configuration
    }

    /// A single connection's configuration (see ``Database/withConnection(url:applicationName:logger:_:)``).
    func connectionConfiguration(route: DatabaseSession.Route, applicationName: String) throws -> PostgresConnection.Configuration {
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
        configuration.options.additionalStartupParameters = DatabaseSession.parameters(self, route: route, applicationName: applicationName)
        configuration.options.connectTimeout = .seconds(5)
        return configuration
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
