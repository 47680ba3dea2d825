import Foundation
import NIOSSL
import PostgresNIO

/// A parsed `postgres://user:password@host:port/database` URL.
///
/// Query parameters: `sslmode` (`disable`, `prefer` (the default, as libpq), `require`) and `host` (a directory
/// holding PostgreSQL's Unix socket, which then replaces the TCP host, as libpq does).
public struct DatabaseURL: Sendable, Equatable, CustomStringConvertible {
    public enum TLSMode: String, Sendable { case disable, prefer, require }

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var tlsMode: TLSMode
    /// The Unix-socket directory, when the URL names one.
    public var socketDirectory: String?

    /// Parses `text`; the error names `key` and never repeats the password.
    public init(parsing text: String, key: String = ConfigurationKey.databaseURL.environmentName) throws(ConfigurationError) {
        func invalid(_ reason: String) -> ConfigurationError {
            ConfigurationError(code: .invalidValue, key: key, reason: reason + " (expected postgres://user:password@host:port/database)")
        }
        guard let components = URLComponents(string: text) else { throw invalid("not a URL") }
        guard let scheme = components.scheme?.lowercased(), scheme == "postgres" || scheme == "postgresql" else {
            throw invalid("the scheme must be postgres://")
        }
        guard let user = components.user, !user.isEmpty else { throw invalid("no user name") }
        var database = components.path
        if database.hasPrefix("/") { database.removeFirst() }
        database = database.removingPercentEncoding ?? database
        var socketDirectory: String?
        var tlsMode = TLSMode.prefer
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let value = item.value, let mode = TLSMode(rawValue: value) else {
                    throw invalid("sslmode must be disable, prefer or require")
                }
                tlsMode = mode
            case "host":
                socketDirectory = item.value
            default:
                throw invalid("unknown parameter '\(item.name)'")
            }
        }
        let host = components.host ?? ""
        guard !host.isEmpty || socketDirectory != nil else { throw invalid("no host") }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw invalid("port out of range") }
        self.host = host
        self.port = port
        self.username = user
        self.password = components.password
        self.database = database.isEmpty ? user : database
        self.tlsMode = tlsMode
        self.socketDirectory = socketDirectory
    }

    /// The same server and credentials with another database name (tests and tools create databases).
    public func with(database: String) -> DatabaseURL {
        var copy = self
        copy.database = database
        return copy
    }

    /// The URL with the password replaced by `***`, safe for logs.
    public var description: String {
        let credentials = password == nil ? username : "\(username):***"
        let location = socketDirectory.map { "\(host)?host=\($0)" } ?? "\(host):\(port)"
        return "postgres://\(credentials)@\(location)/\(database)"
    }

    /// The URL as text, password included (for child processes and psql).
    public var connectionString: String {
        var components = URLComponents()
        components.scheme = "postgres"
        components.user = username
        components.password = password
        components.host = host
        components.port = port
        components.path = "/" + database
        var items = [URLQueryItem(name: "sslmode", value: tlsMode.rawValue)]
        if let socketDirectory { items.append(URLQueryItem(name: "host", value: socketDirectory)) }
        components.queryItems = items
        return components.string ?? ""
    }

    /// A PostgresNIO client configuration for this URL; `applicationName` shows in `pg_stat_activity`.
    public func clientConfiguration(applicationName: String) -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let socketDirectory {
            configuration = .init(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)",
                username: username,
                password: password,
                database: database
            )
        } else {
            let tls: PostgresClient.Configuration.TLS
            switch tlsMode {
            case .disable: tls = .disable
            case .prefer: tls = .prefer(.makeClientConfiguration())
            case .require: tls = .require(.makeClientConfiguration())
            }
            configuration = .init(host: host, port: port, username: username, password: password, database: database, tls: tls)
        }
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        configuration.options.connectTimeout = .seconds(5)
        return configuration
    }
}
