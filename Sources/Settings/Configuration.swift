import Foundation
package import Logging
package import Observability
package import Support

/// Settings shared by the PushChat processes, read from the mode's section of `config/pushchat.json` and
/// `PUSHCHAT_*` environment variables (see ``ConfigurationKey``).
package struct Configuration: Sendable {
    /// Development or production.
    package var mode: Mode
    /// The PostgreSQL database holding `active_users`, `push_queue` and `messages`. Required.
    package var databaseURL: DatabaseURL
    /// A direct connection to PostgreSQL for the push daemon's `LISTEN` when `database_url` goes through a pooler in
    /// transaction mode (which cannot carry it); without it the daemon polls every `poll_interval` behind a pooler.
    package var databaseListenURL: DatabaseURL?
    /// The address the API server listens on. Default `0.0.0.0` (every interface, as the tutorial's Apache did).
    package var apiHost: String
    /// The API server's port. Default 44447, the tutorial's.
    package var apiPort: Int
    /// The log file; `nil` means the process's default (`log/<process>_<mode>.log`), an empty value or `-`
    /// logs to standard output only.
    package var logFile: String?
    /// The lowest level logged. Default `info`.
    package var logLevel: Logger.Level
    /// Human-readable lines (`text`, the default) or one JSON object per line (`json`).
    package var logFormat: LogFormat = .text
    /// How often the push daemon polls the queue besides waking on NOTIFY. Default 5 seconds.
    package var pollInterval: Duration
    /// The folder holding the numbered `*.sql` migrations. Default `migrations` (relative to the working directory).
    package var migrationsDirectory: String
    /// Abuse limits of the API.
    package var limits = APILimits()
    /// How to reach APNs (or the simulator).
    package var apns: APNsSettings
    /// How to reach FCM (or the simulator's Google side) for the default app's Android devices.
    package var fcm = FCMSettings()
    /// How the push daemon drains the queue.
    package var push = PushSettings()
    /// The test pages and the API's metrics listener.
    package var exposure: ExposureSettings
    /// The most users one feedback run may delete without `--force`.
    package var feedbackMaxPrune = PruneLimit.default
    /// The app the chat API (`/api.php`) belongs to: its users, rooms and messages are that app's (`chat_app`).
    package var chatApp = App.defaultName
    /// What the prune job deletes besides old notifications.
    package var retention = RetentionSettings()
    /// Webhooks' delivery (`webhook_*`).
    package var webhooks = WebhookSettings()
    /// Browsers' push services (`webpush_*`).
    package var webPush = WebPushSettings()

    package init(
        mode: Mode,
        databaseURL: DatabaseURL,
        apiHost: String = "0.0.0.0",
        apiPort: Int = 44447,
        logFile: String? = nil,
        logLevel: Logger.Level = .info,
        pollInterval: Duration = .seconds(5),
        migrationsDirectory: String = "migrations"
    ) {
        self.mode = mode
        self.databaseURL = databaseURL
        self.apiHost = apiHost
        self.apiPort = apiPort
        self.logFile = logFile
        self.logLevel = logLevel
        self.pollInterval = pollInterval
        self.migrationsDirectory = migrationsDirectory
        self.apns = APNsSettings(mode: mode)
        self.exposure = ExposureSettings(mode: mode)
    }

    /// Reads and validates every setting; the first bad one throws an error naming its key.
    package init(source: ConfigurationSource) throws(ConfigurationError) {
        guard let url = source.value(.databaseURL), !url.isEmpty else {
            let file = source.filePath ?? ConfigurationSource.defaultPath
            throw ConfigurationError(
                code: .missingValue,
                key: ConfigurationKey.databaseURL.environmentName,
                reason: "not set: set it in the environment or as '\(ConfigurationKey.databaseURL.fileKey)' "
                    + "in the '\(source.mode.rawValue)' section of \(file)"
            )
        }
        self.init(mode: source.mode, databaseURL: try DatabaseURL(parsing: url, key: source.origin(of: .databaseURL)))
        if let host = source.value(.apiHost) {
            guard !host.isEmpty, !host.contains(where: \.isWhitespace) else {
                throw Self.invalid(.apiHost, source, "expected a host name or IP address")
            }
            apiHost = host
        }
        if let port = source.value(.apiPort) {
            guard let value = Int(port), (0...65535).contains(value) else {
                throw Self.invalid(.apiPort, source, "expected a port number from 0 to 65535, got '\(port)'")
            }
            apiPort = value
        }
        if let file = source.value(.logFile) {
            logFile = file
        }
        if let level = source.value(.logLevel) {
            guard let value = Logger.Level(rawValue: level.lowercased()) else {
                let names = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
                throw Self.invalid(.logLevel, source, "expected one of \(names), got '\(level)'")
            }
            logLevel = value
        }
        if let format = source.value(.logFormat) {
            guard let value = LogFormat(rawValue: format.lowercased()) else {
                throw Self.invalid(.logFormat, source, "expected text or json, got '\(format)'")
            }
            logFormat = value
        }
        pollInterval = try Self.duration(.pollInterval, source) ?? pollInterval
        if let directory = source.value(.migrationsDirectory) {
            guard !directory.isEmpty else { throw Self.invalid(.migrationsDirectory, source, "must not be empty") }
            migrationsDirectory = directory
        }
        apns = try APNsSettings(source: source)
        fcm = try FCMSettings(source: source)
        push = try PushSettings(source: source)
        if source.value(.apnsConnections) == nil && apns.transport == .http2 {
            // Over HTTP/2 the setting is the most connections, opened only while needed.
            push.connections = 4
        }
        limits = try APILimits(source: source)
        exposure = try ExposureSettings(source: source)
        retention = try RetentionSettings(source: source)
        webhooks = try WebhookSettings(source: source)
        webPush = try WebPushSettings(source: source)
        if let text = source.value(.chatApp) {
            guard App.isValidName(text) else {
                throw Self.invalid(.chatApp, source, "expected an app's name (pushchat-api apps list), got '\(text)'")
            }
            chatApp = text
        }
        if let text = source.value(.feedbackMaxPrune) {
            guard let limit = PruneLimit(parsing: text) else {
                throw Self.invalid(.feedbackMaxPrune, source, "expected a number of users or a percentage (e.g. 250 or 10%), got '\(text)'")
            }
            feedbackMaxPrune = limit
        }
        databaseURL.statementTimeout =
            try Self.duration(.databaseStatementTimeout, source, zeroMeans: "no limit") ?? databaseURL.statementTimeout
        databaseURL.lockTimeout = try Self.duration(.databaseLockTimeout, source, zeroMeans: "no limit") ?? databaseURL.lockTimeout
        databaseURL.connections = try Self.integer(.databaseConnections, source, in: 1...1000) ?? databaseURL.connections
        if let text = source.value(.databaseListenURL), !text.isEmpty {
            var listen = try DatabaseURL(parsing: text, key: source.origin(of: .databaseListenURL))
            (listen.statementTimeout, listen.lockTimeout) = (databaseURL.statementTimeout, databaseURL.lockTimeout)
            databaseListenURL = listen
        }
    }

    /// Loads the configuration for `mode` from `path` (or the default file) and `environment`.
    package static func load(
        mode: Mode,
        path: String?,
        environment: [String: String]
    ) throws(ConfigurationError) -> Configuration {
        try Configuration(source: ConfigurationSource.load(mode: mode, path: path, environment: environment))
    }

    /// The log file path, or `nil` for standard output only.
    package func logFilePath(process: String) -> String? {
        guard let logFile else { return "log/\(process)_\(mode.rawValue).log" }
        return logFile.isEmpty || logFile == "-" ? nil : logFile
    }

    /// Parses `5`, `0.5`, `5s`, `500ms`, `2m`, `3h` or `7d`.
    package static func parseDuration(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let units: [(suffix: String, scale: Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        for unit in units where trimmed.hasSuffix(unit.suffix) {
            guard let number = Double(trimmed.dropLast(unit.suffix.count)), number.isFinite else { return nil }
            return .milliseconds(Int64((number * unit.scale * 1000).rounded()))
        }
        guard let seconds = Double(trimmed), seconds.isFinite else { return nil }
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }

    /// A duration setting (`30`, `500ms`, `7d`), or nil when it is not set; zero only where `zeroMeans` says what it
    /// means, never more than `maximum`.
    static func duration(
        _ key: ConfigurationKey,
        _ source: ConfigurationSource,
        zeroMeans: String? = nil,
        maximum: Duration? = nil
    ) throws(ConfigurationError) -> Duration? {
        guard let text = source.value(key) else { return nil }
        guard let value = parseDuration(text), value > .zero || (zeroMeans != nil && value == .zero),
            maximum.map({ value <= $0 }) ?? true
        else {
            var expected = "a duration such as 30, 0.5, 500ms, 2m or 7d"
            if let zeroMeans { expected += " (0: \(zeroMeans))" }
            if let maximum { expected += ", at most \(maximum.formatted)" }
            throw invalid(key, source, "expected \(expected), got '\(text)'")
        }
        return value
    }

    static func integer(
        _ key: ConfigurationKey,
        _ source: ConfigurationSource,
        in range: ClosedRange<Int>
    ) throws(ConfigurationError) -> Int? {
        guard let text = source.value(key) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw invalid(
                key,
                source,
                "expected a whole number from \(range.lowerBound) to \(range.upperBound), got '\(text)'"
            )
        }
        return value
    }

    /// `host:port` pairs separated by commas (`webhook_private_hosts`, `webpush_private_hosts`), lower-case; nil when
    /// the setting is absent.
    static func hostPorts(_ key: ConfigurationKey, _ source: ConfigurationSource) throws(ConfigurationError) -> Set<String>? {
        guard let text = source.value(key) else { return nil }
        var hosts: Set<String> = []
        for item in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
            guard let colon = item.lastIndex(of: ":"), let port = Int(item[item.index(after: colon)...]), (1...65535).contains(port),
                colon > item.startIndex
            else {
                throw invalid(key, source, "expected host:port pairs separated by commas, got '\(item)'")
            }
            hosts.insert(item.lowercased())
        }
        return hosts
    }

    /// An absolute path, or nil when the setting is absent.
    static func absolutePath(_ key: ConfigurationKey, _ source: ConfigurationSource) throws(ConfigurationError) -> String? {
        guard let file = source.value(key) else { return nil }
        guard file.hasPrefix("/") else { throw invalid(key, source, "expected an absolute path, got '\(file)'") }
        return file
    }

    static func invalid(_ key: ConfigurationKey, _ source: ConfigurationSource, _ reason: String) -> ConfigurationError {
        ConfigurationError(code: .invalidValue, key: source.origin(of: key), reason: reason)
    }
}
