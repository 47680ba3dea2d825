import Foundation
import Logging
import NIOSSL
import Testing

@testable import Settings
@testable import Support

@Suite struct ModeTests {
    @Test func argumentWinsOverEnvironment() throws {
        #expect(try Mode.resolve(argument: .development, environment: ["APPLICATION_ENV": "production"]) == .development)
    }

    @Test func environmentWhenNoArgument() throws {
        #expect(try Mode.resolve(argument: nil, environment: ["APPLICATION_ENV": "development"]) == .development)
    }

    @Test func productionByDefault() throws {
        #expect(try Mode.resolve(argument: nil, environment: [:]) == .production)
    }

    @Test func unknownEnvironmentValueIsAnError() {
        #expect(throws: ConfigurationError.self) {
            try Mode.resolve(argument: nil, environment: ["APPLICATION_ENV": "staging"])
        }
    }
}

@Suite struct ConfigurationTests {
    static let url = "postgres://pushchat:secret@db.example:5433/chat"

    func write(_ json: String) throws -> String {
        let path = NSTemporaryDirectory() + "pushchat-config-\(UUID().uuidString).json"
        try json.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func readsTheModeSectionOfTheFile() throws {
        let path = try write(
            """
            {"_comment": "PushChat",
             "development": {"database_url": "\(Self.url)", "api_port": 8080, "poll_interval": 0.5, "_note": "x"},
             "production": {"database_url": "postgres://other@localhost/prod"}}
            """
        )
        let configuration = try Configuration.load(mode: .development, path: path, environment: [:])
        #expect(configuration.databaseURL.host == "db.example")
        #expect(configuration.databaseURL.port == 5433)
        #expect(configuration.apiPort == 8080)
        #expect(configuration.pollInterval == .milliseconds(500))
        #expect(configuration.apiHost == "0.0.0.0")
        let production = try Configuration.load(mode: .production, path: path, environment: [:])
        #expect(production.databaseURL.database == "prod")
        #expect(production.apiPort == 44447)
    }

    @Test func environmentOverridesTheFile() throws {
        let path = try write(#"{"development": {"database_url": "postgres://a@h/db", "api_port": 8080}}"#)
        let configuration = try Configuration.load(
            mode: .development,
            path: path,
            environment: ["PUSHCHAT_API_PORT": "9000", "PUSHCHAT_API_HOST": "127.0.0.1", "PUSHCHAT_LOG_FILE": "-"]
        )
        #expect(configuration.apiPort == 9000)
        #expect(configuration.apiHost == "127.0.0.1")
        #expect(configuration.logFilePath(process: "api") == nil)
    }

    @Test func defaultLogFileNamesProcessAndMode() throws {
        let configuration = try Configuration.load(mode: .development, path: nil, environment: ["PUSHCHAT_DATABASE_URL": Self.url])
        #expect(configuration.logFilePath(process: "push") == "log/push_development.log")
    }

    @Test func missingDatabaseURLNamesTheKey() throws {
        let path = try write(#"{"production": {"api_port": 1}}"#)
        let error = #expect(throws: ConfigurationError.self) {
            try Configuration.load(mode: .production, path: path, environment: [:])
        }
        #expect(error?.code == .missingValue)
        #expect(error?.description.contains("PUSHCHAT_DATABASE_URL") == true)
        #expect(error?.description.contains("\n") == false)
    }

    @Test(arguments: [
        ("PUSHCHAT_API_PORT", "eighty"),
        ("PUSHCHAT_API_PORT", "70000"),
        ("PUSHCHAT_POLL_INTERVAL", "-1"),
        ("PUSHCHAT_POLL_INTERVAL", "soon"),
        ("PUSHCHAT_LOG_LEVEL", "loud"),
        ("PUSHCHAT_DATABASE_URL", "mysql://root@localhost/db"),
    ])
    func malformedValueNamesTheKey(key: String, value: String) throws {
        var environment = ["PUSHCHAT_DATABASE_URL": Self.url]
        environment[key] = value
        let error = #expect(throws: ConfigurationError.self) {
            try Configuration.load(mode: .production, path: nil, environment: environment)
        }
        #expect(error?.code == .invalidValue)
        #expect(error?.key == key)
    }

    @Test func theLargestClaimIsFourBatchesUnlessSetAndNeverBelowABatch() throws {
        let base = ["PUSHCHAT_DATABASE_URL": Self.url]
        #expect(try Configuration.load(mode: .production, path: nil, environment: base).push.batchMax == 8000)
        let small = base.merging(["PUSHCHAT_PUSH_BATCH_SIZE": "500"]) { $1 }
        #expect(try Configuration.load(mode: .production, path: nil, environment: small).push.batchMax == 2000)
        let large = base.merging(["PUSHCHAT_PUSH_BATCH_SIZE": "20000"]) { $1 }
        #expect(try Configuration.load(mode: .production, path: nil, environment: large).push.batchMax == 50_000)
        let off = base.merging(["PUSHCHAT_PUSH_BATCH_MAX": "2000"]) { $1 }
        #expect(try Configuration.load(mode: .production, path: nil, environment: off).push.batchMax == 2000)
        let below = base.merging(["PUSHCHAT_PUSH_BATCH_MAX": "1999"]) { $1 }
        let error = #expect(throws: ConfigurationError.self) {
            try Configuration.load(mode: .production, path: nil, environment: below)
        }
        #expect(error?.key == "PUSHCHAT_PUSH_BATCH_MAX")
        #expect(error?.description.contains("at least push_batch_size (2000)") == true)
    }

    @Test func passwordNeverAppearsInErrors() throws {
        let error = #expect(throws: ConfigurationError.self) {
            try Configuration.load(
                mode: .production,
                path: nil,
                environment: ["PUSHCHAT_DATABASE_URL": "postgres://u:hunter2@h/db?sslmode=maybe"]
            )
        }
        #expect(error?.description.contains("hunter2") == false)
    }

    @Test func unknownKeyInTheFileIsReported() throws {
        let path = try write(#"{"development": {"databse_url": "postgres://a@h/db"}}"#)
        let error = #expect(throws: ConfigurationError.self) {
            try Configuration.load(mode: .development, path: path, environment: [:])
        }
        #expect(error?.code == .unknownKey)
        #expect(error?.description.contains("databse_url") == true)
    }

    @Test func malformedFileIsReported() throws {
        let path = try write(#"{"development": ["#)
        let error = #expect(throws: ConfigurationError.self) {
            try Configuration.load(mode: .development, path: path, environment: [:])
        }
        #expect(error?.code == .malformedFile)
        #expect(error?.key == path)
    }

    @Test func explicitMissingFileIsAnError() throws {
        let error = #expect(throws: ConfigurationError.self) {
            try Configuration.load(mode: .development, path: "/nonexistent/pushchat.json", environment: ["PUSHCHAT_DATABASE_URL": Self.url])
        }
        #expect(error?.code == .unreadableFile)
    }

    @Test func theShippedConfigFileParses() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let path = root.appendingPathComponent("config/pushchat.json").path
        for mode in Mode.allCases {
            let source = try ConfigurationSource.load(mode: mode, path: path, environment: [:])
            #expect(source.value(.databaseURL) != nil)
            _ = try Configuration(source: source)
        }
    }

    @Test(arguments: [("5", 5000), ("0.25", 250), ("500ms", 500), ("2s", 2000), ("1m", 60000)])
    func durations(text: String, milliseconds: Int64) {
        #expect(Configuration.parseDuration(text) == .milliseconds(milliseconds))
    }
}

@Suite struct DatabaseURLTests {
    @Test func parsesEveryPart() throws {
        let url = try DatabaseURL(parsing: "postgres://push%40chat:p%3Ass@127.0.0.1:6543/chat_db?sslmode=disable")
        #expect(url.username == "push@chat")
        #expect(url.password == "p:ss")
        #expect(url.host == "127.0.0.1")
        #expect(url.port == 6543)
        #expect(url.database == "chat_db")
        #expect(url.tlsMode == .disable)
    }

    @Test func defaults() throws {
        let url = try DatabaseURL(parsing: "postgresql://pushchat@localhost")
        #expect(url.port == 5432)
        #expect(url.database == "pushchat")
        #expect(url.tlsMode == .prefer)
        #expect(url.password == nil)
    }

    @Test func descriptionHidesThePassword() throws {
        let url = try DatabaseURL(parsing: "postgres://u:topsecret@h:1/d")
        #expect(!url.description.contains("topsecret"))
        #expect(url.description == "postgres://u:***@h:1/d")
        #expect(try DatabaseURL(parsing: url.connectionString) == url)
    }

    /// libpq's meaning: only verify-ca and verify-full check the certificate (a stock Debian server's is self-signed).
    @Test func sslModesFollowLibpq() throws {
        let modes: [(String, DatabaseURL.TLSMode, CertificateVerification?)] = [
            ("disable", .disable, nil), ("allow", .allow, CertificateVerification.none), ("prefer", .prefer, CertificateVerification.none),
            ("require", .require, CertificateVerification.none), ("verify-ca", .verifyCA, .noHostnameVerification),
            ("verify-full", .verifyFull, .fullVerification),
        ]
        let root = NSTemporaryDirectory() + "pushchat-root-\(UUID().uuidString).pem"
        try Data("not checked here".utf8).write(to: URL(fileURLWithPath: root))
        defer { try? FileManager.default.removeItem(atPath: root) }
        for (text, mode, verification) in modes {
            let url = try DatabaseURL(parsing: "postgres://u@h/d?sslmode=\(text)" + (mode == .verifyCA ? "&sslrootcert=\(root)" : ""))
            #expect(url.tlsMode == mode)
            #expect(url.tlsConfiguration?.certificateVerification == verification, "sslmode=\(text)")
        }
        #expect(try DatabaseURL(parsing: "postgres://u@h/d").tlsConfiguration?.certificateVerification == CertificateVerification.none)
        // libpq: require with a root file verifies the chain; verify-ca without one (or with system) is refused.
        let requireWithRoot = try DatabaseURL(parsing: "postgres://u@h/d?sslmode=require&sslrootcert=\(root)")
        #expect(requireWithRoot.tlsConfiguration?.certificateVerification == .noHostnameVerification)
        for query in ["sslmode=verify-ca", "sslmode=verify-ca&sslrootcert=system"] {
            let error = #expect(throws: ConfigurationError.self) { try DatabaseURL(parsing: "postgres://u@h/d?\(query)") }
            #expect(error?.reason.contains("sslrootcert") == true, "\(query)")
        }
        // In production, anything weaker than verify-full to another machine is warned about.
        #expect(try DatabaseURL(parsing: "postgres://u@db.example/d?sslmode=require").tlsWeakness?.contains("verify-full") == true)
        #expect(try DatabaseURL(parsing: "postgres://u@db.example/d?sslmode=verify-full").tlsWeakness == nil)
        #expect(try DatabaseURL(parsing: "postgres://u@127.0.0.1/d?sslmode=require").tlsWeakness == nil)
        #expect(try DatabaseURL(parsing: "postgres://u@localhost/d?host=/run/postgresql").tlsWeakness == nil)
    }

    @Test func sslRootCertIsReadAtStartAndKeptInTheConnectionString() throws {
        let file = NSTemporaryDirectory() + "pushchat-root-\(UUID().uuidString).pem"
        try Data("not checked here".utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let url = try DatabaseURL(parsing: "postgres://u@h/d?sslmode=verify-full&sslrootcert=\(file)")
        #expect(url.rootCertificateFile == file)
        #expect(try DatabaseURL(parsing: url.connectionString) == url)
        #expect(try DatabaseURL(parsing: "postgres://u@h/d?sslmode=verify-full&sslrootcert=system").rootCertificateFile == nil)
        let error = #expect(throws: ConfigurationError.self) {
            try DatabaseURL(parsing: "postgres://u@h/d?sslmode=verify-full&sslrootcert=/nonexistent/root.crt")
        }
        #expect(error?.description.contains("/nonexistent/root.crt") == true)
        let mode = #expect(throws: ConfigurationError.self) { try DatabaseURL(parsing: "postgres://u@h/d?sslmode=verify") }
        #expect(mode?.description.contains("verify-ca, verify-full") == true)
    }

    /// libpq's multi-host URLs: hosts in order with their ports (5432 when left out), what the session must be,
    /// each host's connect timeout; kept whole in the connection string a child process gets.
    @Test func multiHostURLsFollowLibpq() throws {
        let url = try DatabaseURL(
            parsing: "postgres://u:pw@db1.example:5433,db2.example,[::1]:6000/chat?target_session_attrs=read-write&connect_timeout=3"
        )
        #expect(
            url.hosts == [
                .init(host: "db1.example", port: 5433), .init(host: "db2.example", port: 5432), .init(host: "::1", port: 6000),
            ]
        )
        #expect(url.host == "db1.example" && url.port == 5433, "sessions start with the first")
        #expect(url.targetSessionAttributes == .readWrite)
        #expect(url.connectTimeout == .seconds(3))
        #expect(url.choosesHost)
        #expect(url.username == "u" && url.password == "pw" && url.database == "chat")
        #expect(url.description == "postgres://u:***@db1.example:5433,db2.example:5432,[::1]:6000/chat")
        #expect(try DatabaseURL(parsing: url.connectionString) == url)
        let second = url.on(url.hosts[1])
        #expect(second.host == "db2.example" && second.port == 5432 && second.hosts.count == 1)
        #expect(second.targetSessionAttributes == .readWrite && second.choosesHost, "the chosen host is still checked")
        for value in DatabaseURL.TargetSessionAttributes.allCases {
            #expect(try DatabaseURL(parsing: "postgres://u@a,b/d?target_session_attrs=\(value.rawValue)").targetSessionAttributes == value)
        }
        #expect(try DatabaseURL(parsing: "postgres://u@a,b/d?load_balance_hosts=random").loadBalanceHosts)
        #expect(try DatabaseURL(parsing: "postgres://u@a/d").choosesHost == false, "one host, any session: as before")
        let remoteStandby = try DatabaseURL(parsing: "postgres://u@127.0.0.1:5432,db2.example:5432/d?sslmode=require")
        #expect(remoteStandby.tlsWeakness?.contains("db2.example") == true, "a remote standby is warned about too")
        #expect(try DatabaseURL(parsing: "postgres://u@a/d?connect_timeout=1").connectTimeout == .seconds(2), "libpq: 1 counts as 2")
        // libpq's query form: host= and port= lists (one port for all, or one per host); a / is a socket folder.
        #expect(
            try DatabaseURL(parsing: "postgres://u@/d?host=db1,db2&port=5433,5434").hosts == [
                .init(host: "db1", port: 5433), .init(host: "db2", port: 5434),
            ]
        )
        #expect(
            try DatabaseURL(parsing: "postgres://u@x/d?host=db1,db2&port=6432").hosts == [
                .init(host: "db1", port: 6432), .init(host: "db2", port: 6432),
            ]
        )
        #expect(try DatabaseURL(parsing: "postgres://u@/d?host=db1,db2").hosts.map(\.port) == [5432, 5432])
        #expect(try DatabaseURL(parsing: "postgres://u@a:1,b:2/d?port=7").hosts.map(\.port) == [7, 7])
        let socket = try DatabaseURL(parsing: "postgres://u@localhost:5433/d?host=/run/postgresql")
        #expect(socket.socketDirectory == "/run/postgresql" && socket.port == 5433 && !socket.choosesHost)
        for bad in [
            "postgres://u@/d?host=db1,db2&port=1,2,3", "postgres://u@/d?host=db1,&port=1", "postgres://u@/d?host=a&port=x",
            "postgres://u@/d?host=/run/a,/run/b",
            "postgres://u@a,b/d?target_session_attrs=writable", "postgres://u@a,/d", "postgres://u@a,b:x/d", "postgres://u@a,b:70000/d",
            "postgres://u@a,b/d?connect_timeout=soon", "postgres://u@a,b/d?load_balance_hosts=yes",
        ] {
            #expect(throws: ConfigurationError.self, "\(bad)") { try DatabaseURL(parsing: bad) }
        }
    }

    @Test(arguments: ["localhost:5432", "postgres://localhost/db", "postgres://u@h/db?foo=bar", "http://u@h/db", "postgres://u@h:99999/db"])
    func rejects(text: String) {
        #expect(throws: ConfigurationError.self) { try DatabaseURL(parsing: text) }
    }
}

/// Rotating the token key: the key id comes with the file as Apple names it, so the two change together.
@Suite struct KeyFileNameTests {
    static func settings(_ environment: [String: String]) throws(ConfigurationError) -> APNsSettings {
        let source = ConfigurationSource(
            mode: .production,
            environment: ["PUSHCHAT_DATABASE_URL": "postgres://u@h/d"].merging(environment) { $1 }
        )
        return try Configuration(source: source).apns
    }

    @Test func theKeyIDIsReadFromApplesFileName() throws {
        let apns = try Self.settings(["PUSHCHAT_APNS_KEY_FILE": "/etc/pushchat/AuthKey_ABC123DEFG.p8"])
        #expect(apns.keyID == "ABC123DEFG")
        #expect(APNsSettings.keyID(fileName: "AuthKey.p8") == nil)
        #expect(APNsSettings.keyID(fileName: "/etc/pushchat/AuthKey_abc123defg.p8") == nil)
        #expect(APNsSettings.keyID(fileName: "AuthKey_ABC123DEFGH.p8") == nil)
    }

    @Test func anIDThatContradictsTheFileNameIsRefusedNamingBoth() {
        do {
            _ = try Self.settings([
                "PUSHCHAT_APNS_KEY_FILE": "/etc/pushchat/AuthKey_NEWKEY0002.p8", "PUSHCHAT_APNS_KEY_ID": "OLDKEY0001",
            ])
            Issue.record("a key id that contradicts the file name was accepted")
        } catch {
            #expect(error.key == "PUSHCHAT_APNS_KEY_ID")
            #expect(error.reason.contains("OLDKEY0001") && error.reason.contains("NEWKEY0002"))
        }
    }

    @Test func anIDWithAFileNamedOtherwiseIsKept() throws {
        let apns = try Self.settings(["PUSHCHAT_APNS_KEY_FILE": "/etc/pushchat/signing.p8", "PUSHCHAT_APNS_KEY_ID": "ABC123DEFG"])
        #expect(apns.keyID == "ABC123DEFG")
        #expect(try Self.settings(["PUSHCHAT_APNS_KEY_FILE": "/etc/pushchat/signing.p8"]).keyID == nil)
    }
}
