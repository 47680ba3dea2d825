import Foundation
package import NIOSSL
import Observability
package import Support

/// A parsed `postgres://user:password@host:port/database` URL.
///
/// Query parameters, with libpq's meaning:
/// - `sslmode`: `disable` (plain TCP); `allow` and `prefer` (the default) use TLS when the server offers it, and
///   `require` insists on it, all three without verifying the server's certificate (a stock Debian PostgreSQL has
///   `ssl = on` with a self-signed "snakeoil" certificate); `verify-ca` verifies the chain, and `verify-full` also
///   the host name, against `sslrootcert`. As libpq does, `require` with a root file verifies the chain (as
///   `verify-ca`).
/// - `sslrootcert`: a PEM file of trusted roots; `system` (or none, with `verify-full` only) the system's roots.
///   `verify-ca` needs a file: the system's roots with no host check would trust any host that any public CA
///   certified (libpq refuses `verify-ca` with `system` too).
/// - `host`: a directory holding PostgreSQL's Unix socket, which then replaces the TCP host.
///
/// Several hosts, as libpq takes them (`postgres://user@h1:5432,h2:5433/db?target_session_attrs=read-write`): tried in
/// order (shuffled with `load_balance_hosts=random`) until one answers and is what `target_session_attrs` asks —
/// `any` (the default), `read-write` or `read-only` (by `transaction_read_only`), `primary` or `standby` (by
/// `pg_is_in_recovery()`), `prefer-standby` (a standby, else any). `connect_timeout` (seconds) bounds each host's try.
package struct DatabaseURL: Sendable, Equatable, CustomStringConvertible {
    /// One `host:port` of the URL's host list.
    package typealias Host = Endpoint

    /// libpq's `target_session_attrs`: which of the hosts a session may use.
    package enum TargetSessionAttributes: String, Sendable, CaseIterable {
        case any
        case readWrite = "read-write"
        case readOnly = "read-only"
        case primary, standby
        case preferStandby = "prefer-standby"
    }

    package enum TLSMode: String, Sendable, CaseIterable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"

        /// Whether the server's certificate is checked against trusted roots.
        package var verifiesCertificate: Bool { self == .verifyCA || self == .verifyFull }
    }

    /// The host sessions go to: the first of ``hosts`` (or the one ``on(_:)`` chose).
    package var host: String
    package var port: Int
    /// Every host of the URL, in its order (one for a single-host URL).
    package var hosts: [Host]
    /// `target_session_attrs` (default `any`).
    package var targetSessionAttributes = TargetSessionAttributes.any
    /// `connect_timeout`: how long each host's connection may take (nil: the default, 5 s).
    package var connectTimeout: Duration?
    /// `load_balance_hosts=random`: the hosts tried in a random order.
    package var loadBalanceHosts = false
    package var username: String
    package var password: String?
    package var database: String
    package var tlsMode: TLSMode
    /// Trusted roots for `verify-ca`/`verify-full` (`sslrootcert`); nil: the system's.
    package var rootCertificateFile: String?
    /// Every session's `statement_timeout` (`database_statement_timeout`): a statement stuck behind an operator's
    /// open transaction fails after it instead of holding a request or a drain forever. Default 30 s; zero: none.
    package var statementTimeout: Duration = .seconds(30)
    /// Every session's `lock_timeout` (`database_lock_timeout`). Default 10 s; zero: none.
    package var lockTimeout: Duration = .seconds(10)
    /// The connections of a process's pool (`database_connections`): the API and the push daemon open them all at
    /// start and keep them, a short job opens them as it needs them. Default 10.
    package var connections = 10
    /// The Unix-socket directory, when the URL names one.
    package var socketDirectory: String?

    /// Parses `text`; the error names `key` and never repeats the password.
    package init(parsing text: String, key: String = ConfigurationKey.databaseURL.environmentName) throws(ConfigurationError) {
        func invalid(_ reason: String) -> ConfigurationError {
            ConfigurationError(code: .invalidValue, key: key, reason: reason + " (expected postgres://user:password@host:port/database)")
        }
        // libpq's host list (`h1:5432,h2:5433`) is not a URL authority: parsed here, the first host put in its place.
        var text = text
        var listed: [Host]?
        if let schemeEnd = text.range(of: "://") {
            let rest = text[schemeEnd.upperBound...]
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
            let authority = rest[..<authorityEnd]
            let hostStart = authority.lastIndex(of: "@").map { authority.index(after: $0) } ?? authority.startIndex
            let hostList = authority[hostStart...]
            if hostList.contains(",") {
                var hosts: [Host] = []
                for entry in hostList.split(separator: ",", omittingEmptySubsequences: false) {
                    guard let host = Self.host(String(entry)) else { throw invalid("'\(entry)' in the host list is not host[:port]") }
                    hosts.append(host)
                }
                listed = hosts
                text.replaceSubrange(hostStart..<authorityEnd, with: hostList.split(separator: ",")[0])
            }
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
        var targetSessionAttributes = TargetSessionAttributes.any
        var connectTimeout: Duration?
        var loadBalanceHosts = false
        var tlsMode = TLSMode.prefer
        var rootCertificateFile: String?
        var queryHosts: [String]?
        var queryPorts: [String]?
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let value = item.value, let mode = TLSMode(rawValue: value) else {
                    throw invalid("sslmode must be one of \(TLSMode.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                tlsMode = mode
            case "sslrootcert":
                guard let value = item.value, !value.isEmpty else { throw invalid("sslrootcert needs a file") }
                if value != "system" {
                    guard FileManager.default.isReadableFile(atPath: value) else {
                        throw invalid("sslrootcert: cannot read '\(value)'")
                    }
                    rootCertificateFile = value
                }
            case "host":
                // libpq: a value that starts with / is a Unix socket's folder; otherwise host names, as in the URL.
                guard let value = item.value, !value.isEmpty else { throw invalid("host needs a value") }
                if value.hasPrefix("/") {
                    guard !value.contains(",") else { throw invalid("host= takes one socket folder") }
                    socketDirectory = value
                } else {
                    queryHosts = value.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
                }
            case "port":
                guard let value = item.value, !value.isEmpty else { throw invalid("port needs a value") }
                queryPorts = value.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            case "target_session_attrs":
                guard let value = item.value, let attributes = TargetSessionAttributes(rawValue: value) else {
                    throw invalid(
                        "target_session_attrs must be one of \(TargetSessionAttributes.allCases.map(\.rawValue).joined(separator: ", "))"
                    )
                }
                targetSessionAttributes = attributes
            case "connect_timeout":
                guard let value = item.value, let seconds = Int(value), seconds >= 0 else {
                    throw invalid("connect_timeout must be whole seconds")
                }
                // libpq: 0 (or none) waits indefinitely; 1 counts as 2.
                connectTimeout = seconds == 0 ? nil : .seconds(max(2, seconds))
            case "load_balance_hosts":
                guard let value = item.value, ["disable", "random"].contains(value) else {
                    throw invalid("load_balance_hosts must be disable or random")
                }
                loadBalanceHosts = value == "random"
            default:
                throw invalid("unknown parameter '\(item.name)'")
            }
        }
        if tlsMode == .verifyCA && rootCertificateFile == nil {
            throw invalid(
                "sslmode=verify-ca needs sslrootcert=FILE (the CA that signed the server's certificate): with the system's "
                    + "roots and no host name check any publicly certified host would pass; or use verify-full"
            )
        }
        if queryHosts != nil || queryPorts != nil {
            listed = try Self.queryHosts(
                queryHosts,
                ports: queryPorts,
                urlHosts: listed ?? [Host(host: components.host ?? "", port: components.port ?? 5432)],
                key: key
            )
        }
        let host = components.host ?? ""
        guard !host.isEmpty || socketDirectory != nil || listed != nil else { throw invalid("no host") }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw invalid("port out of range") }
        self.host = host
        self.port = port
        self.hosts = listed ?? [Host(host: host, port: port)]
        if let first = listed?.first {
            self.host = first.host
            self.port = first.port
        }
        self.targetSessionAttributes = targetSessionAttributes
        self.connectTimeout = connectTimeout
        self.loadBalanceHosts = loadBalanceHosts
        self.username = user
        self.password = components.password
        self.database = database.isEmpty ? user : database
        self.tlsMode = tlsMode
        self.rootCertificateFile = rootCertificateFile
        self.socketDirectory = socketDirectory
    }

    /// libpq's `?host=a,b&port=x,y`: the query's hosts replace the URL's; one port for all or one per host (a port
    /// list alone applies to the URL's hosts the same way).
    static func queryHosts(_ names: [String]?, ports: [String]?, urlHosts: [Host], key: String) throws(ConfigurationError) -> [Host] {
        func invalid(_ reason: String) -> ConfigurationError { ConfigurationError(code: .invalidValue, key: key, reason: reason) }
        let names = names ?? urlHosts.map(\.host)
        let defaults = urlHosts.count == names.count ? urlHosts.map(\.port) : Array(repeating: 5432, count: names.count)
        var numbers: [Int] = defaults
        if let ports {
            guard ports.count == 1 || ports.count == names.count else {
                throw invalid("port= lists \(ports.count) ports for \(names.count) hosts: give one, or one per host")
            }
            numbers = try ports.map { (text: String) throws(ConfigurationError) -> Int in
                guard let number = Int(text), (1...65535).contains(number) else { throw invalid("'\(text)' in port= is not a port") }
                return number
            }
            if numbers.count == 1 { numbers = Array(repeating: numbers[0], count: names.count) }
        }
        return try zip(names, numbers).map { (name: String, port: Int) throws(ConfigurationError) -> Host in
            guard !name.isEmpty, !name.hasPrefix("/"), !name.contains(where: { "/@?#".contains($0) }) else {
                throw invalid("'\(name)' in host= is not a host name")
            }
            return Host(host: name, port: port)
        }
    }

    /// One entry of a host list: `host`, `host:port`, `[v6]` or `[v6]:port` (libpq's port 5432 when left out).
    static func host(_ entry: String) -> Host? {
        let hasPort = entry.hasPrefix("[") ? entry.hasSuffix("]") == false : entry.contains(":")
        guard let host = Endpoint(parsing: hasPort ? entry : entry + ":5432"), !host.host.contains(where: { "/@?#".contains($0) }) else {
            return nil
        }
        return host
    }

    /// Whether sessions must pick among hosts, or check what the one host is.
    package var choosesHost: Bool { hosts.count > 1 || targetSessionAttributes != .any }

    /// The same URL on `host` alone (a session's chosen host), keeping what it asks of it.
    package func on(_ host: Host) -> DatabaseURL {
        var copy = self
        copy.host = host.host
        copy.port = host.port
        copy.hosts = [host]
        return copy
    }

    /// Why this URL does not authenticate the server, for a warning in production: anything weaker than
    /// `verify-full` to a host that is not this machine (a Unix socket and loopback are). Nil when it does.
    package var tlsWeakness: String? {
        guard socketDirectory == nil, tlsMode != .verifyFull else { return nil }
        // Every host of a multi-host URL: a standby on another machine is as exposed as the primary.
        func isLoopback(_ name: String) -> Bool {
            ["localhost", "127.0.0.1", "::1", "[::1]"].contains(name.lowercased()) || name.hasPrefix("127.")
        }
        guard let remote = hosts.map(\.host).first(where: { !isLoopback($0) }) else { return nil }
        return "sslmode=\(tlsMode.rawValue) to a remote host does not check the server is \(remote) "
            + "(a machine in the path can read the password and every row): use sslmode=verify-full&sslrootcert=FILE"
    }

    /// The same server and credentials with another database name (tests and tools create databases).
    package func with(database: String) -> DatabaseURL {
        var copy = self
        copy.database = database
        return copy
    }

    /// The URL with the password replaced by `***`, safe for logs.
    package var description: String {
        let credentials = password == nil ? username : "\(username):***"
        let location = socketDirectory.map { "\(host)?host=\($0)" } ?? hosts.map(\.description).joined(separator: ",")
        return "postgres://\(credentials)@\(location)/\(database)"
    }

    /// The URL as text, password included (for child processes and psql).
    package var connectionString: String {
        var components = URLComponents()
        components.scheme = "postgres"
        components.user = username
        components.password = password
        components.host = host
        components.port = port
        components.path = "/" + database
        var items = [URLQueryItem(name: "sslmode", value: tlsMode.rawValue)]
        if let rootCertificateFile { items.append(URLQueryItem(name: "sslrootcert", value: rootCertificateFile)) }
        if let socketDirectory { items.append(URLQueryItem(name: "host", value: socketDirectory)) }
        if targetSessionAttributes != .any {
            items.append(URLQueryItem(name: "target_session_attrs", value: targetSessionAttributes.rawValue))
        }
        if let connectTimeout { items.append(URLQueryItem(name: "connect_timeout", value: "\(connectTimeout.components.seconds)")) }
        if loadBalanceHosts { items.append(URLQueryItem(name: "load_balance_hosts", value: "random")) }
        components.queryItems = items
        guard hosts.count > 1, let text = components.string, let placeholder = text.range(of: "@\(Host(host: host, port: port))") else {
            return components.string ?? ""
        }
        // libpq's host list in place of the URL's one host.
        return text.replacingCharacters(in: placeholder, with: "@" + hosts.map(\.description).joined(separator: ","))
    }

    /// The TLS client configuration `sslmode` asks for (libpq's meaning), nil for `disable`.
    package var tlsConfiguration: TLSConfiguration? {
        guard tlsMode != .disable else { return nil }
        var tls = TLSConfiguration.makeClientConfiguration()
        switch tlsMode {
        case .disable, .allow, .prefer: tls.certificateVerification = .none
        // libpq: "if a root CA file exists, the behavior of sslmode=require will be the same as that of verify-ca".
        case .require: tls.certificateVerification = rootCertificateFile == nil ? .none : .noHostnameVerification
        case .verifyCA: tls.certificateVerification = .noHostnameVerification
        case .verifyFull: tls.certificateVerification = .fullVerification
        }
        if let rootCertificateFile { tls.trustRoots = .file(rootCertificateFile) }
        return tls
    }
}
