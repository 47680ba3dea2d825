import Foundation
import HTTPTypes
import HummingbirdTesting
import PostgresNIO
import Testing

@testable import API
@testable import APNs
@testable import APNsTransport
@testable import Feedback
@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support

/// Several apps on one server (issue 29): `pushchat-api apps`, keys that work only inside their app, devices per app,
/// and invalid-token reports that prune only their app's devices.
@Suite struct AppsTests {
    static let betaTopic = "com.example.Beta"

    static func apps(_ url: DatabaseURL) async throws -> String {
        try await TestDatabase.scalar(url, "SELECT coalesce(md5(string_agg(a::text, ',' ORDER BY name)), '-') FROM apps a", as: String.self)
    }

    /// `pushchat-api apps` as an operator runs it: add (token key, certificate), list, update, disable, enable; every
    /// refusal is one line, exit 1, nothing written; `keys create --app` only for an app that exists.
    @Test func theAppsCommandAddsListsUpdatesDisablesAndRefusesBadSettings() async throws {
        try await TestDatabase.withFreshDatabase { url in
            let environment = ["PUSHCHAT_DATABASE_URL": url.connectionString]
            let api = Executable(name: "pushchat-api")
            func run(_ arguments: [String]) throws -> Executable.Result {
                try api.run(arguments + ["development"], environment: environment)
            }
            let key = TestCertificates.path("AuthKey_DEVKEY0001.p8")
            let added = try run([
                "apps", "add", "beta", "--bundle-id", "com.example.Beta", "--environment", "sandbox", "--key-file", key, "--team-id",
                "DEVTEAM001",
            ])
            #expect(added.status == 0, "\(added.standardError)")
            #expect(added.standardOutput.contains("com.example.Beta in sandbox over http2 with signing key DEVKEY0001 of team DEVTEAM001"))
            let certificate = try run([
                "apps", "add", "white-label.1", "--bundle-id", "com.example.White", "--environment", "production", "--transport", "binary",
                "--certificate", TestCertificates.path("ck.pem"), "--passphrase-file", "/nonexistent/passphrase",
            ])
            #expect(certificate.status == 0, "\(certificate.standardError)")
            #expect(certificate.standardOutput.contains("warning: /nonexistent/passphrase does not exist here"))
            let before = try await Self.apps(url)
            let refusals: [([String], String)] = [
                (
                    [
                        "apps", "add", "beta", "--bundle-id", "com.example.B", "--environment", "sandbox", "--key-file", key, "--team-id",
                        "DEVTEAM001",
                    ], "an app named beta exists"
                ),
                (
                    [
                        "apps", "add", "Bad Name", "--bundle-id", "com.example.B", "--environment", "sandbox", "--key-file", key,
                        "--team-id", "DEVTEAM001",
                    ], "an app name is"
                ),
                (
                    [
                        "apps", "add", "b", "--bundle-id", "nodots", "--environment", "sandbox", "--key-file", key, "--team-id",
                        "DEVTEAM001",
                    ], "is not reverse-DNS"
                ),
                (
                    [
                        "apps", "add", "b", "--bundle-id", "com.example.B", "--environment", "staging", "--key-file", key, "--team-id",
                        "DEVTEAM001",
                    ], "expected sandbox or production"
                ),
                (
                    ["apps", "add", "b", "--bundle-id", "com.example.B", "--environment", "sandbox", "--key-file", key],
                    "--team-id is required"
                ),
                (
                    [
                        "apps", "add", "b", "--bundle-id", "com.example.B", "--environment", "sandbox", "--key-file", key, "--key-id",
                        "OTHERKEY01", "--team-id", "DEVTEAM001",
                    ], "contradicts the key file's name"
                ),
                (
                    [
                        "apps", "add", "b", "--bundle-id", "com.example.B", "--environment", "sandbox", "--key-file",
                        "AuthKey_DEVKEY0001.p8", "--team-id", "DEVTEAM001",
                    ], "must be an absolute path"
                ),
                (
                    [
                        "apps", "add", "b", "--bundle-id", "com.example.B", "--environment", "sandbox", "--transport", "binary",
                        "--key-file", key, "--team-id", "DEVTEAM001",
                    ], "certificate only"
                ),
                (
                    [
                        "apps", "add", "b", "--bundle-id", "com.example.B", "--environment", "sandbox", "--key-file", key, "--team-id",
                        "DEVTEAM001", "--certificate", "/c.pem",
                    ], "contradict each other"
                ),
                (["apps", "add", "b", "--bundle-id", "com.example.B", "--environment", "sandbox"], "give the app's credentials"),
                (
                    ["apps", "update", "nobody", "--bundle-id", "com.example.B", "--environment", "sandbox", "--certificate", "/c.pem"],
                    "no app named nobody"
                ),
                (["apps", "disable", "nobody"], "no enabled app named nobody"),
                (["apps", "enable", "beta"], "no disabled app named beta"),
                (["keys", "create", "k", "--app", "nobody"], "no app named nobody"),
            ]
            for (arguments, reason) in refusals {
                let refused = try run(arguments)
                #expect(refused.status != 0, "\(arguments)")
                #expect(refused.standardError.contains(reason), "\(arguments): \(refused.standardError)")
            }
            #expect(try await Self.apps(url) == before, "refusals write nothing")
            #expect(try await TestDatabase.scalar(url, "SELECT count(*) FROM api_keys", as: Int64.self) == 0)

            let updated = try run([
                "apps", "update", "beta", "--bundle-id", "com.example.Beta2", "--environment", "production", "--certificate",
                "/etc/pushchat/beta.pem",
            ])
            #expect(updated.status == 0, "\(updated.standardError)")
            // update changes only what it is given: forgetting --fcm-service-account removed Android from the app.
            let android = try run([
                "apps", "add", "android", "--bundle-id", "com.example.Droid", "--environment", "sandbox", "--key-file", key,
                "--team-id", "DEVTEAM001", "--fcm-service-account", "/etc/pushchat/droid-fcm.json",
            ])
            #expect(android.status == 0, "\(android.standardError)")
            let moved = try run(["apps", "update", "android", "--environment", "production"])
            #expect(moved.status == 0, "\(moved.standardError)")
            #expect(
                moved.standardOutput.contains(
                    "com.example.Droid in production over http2 with signing key DEVKEY0001 of team DEVTEAM001, and Android devices over FCM"
                ),
                "\(moved.standardOutput)"
            )
            let team = try run(["apps", "update", "android", "--team-id", "OTHERTEAM1"])
            #expect(team.standardOutput.contains("signing key DEVKEY0001 of team OTHERTEAM1, and Android"), "\(team.standardOutput)")
            let noAndroid = try run(["apps", "update", "android", "--no-fcm-service-account"])
            #expect(noAndroid.status == 0 && !noAndroid.standardOutput.contains("FCM"), "\(noAndroid.standardOutput)")
            for (arguments, reason) in [
                (["apps", "update", "android"], "give the settings to change"),
                (["apps", "update", "android", "--passphrase-file", "/p"], "goes with a certificate"),
                (["apps", "update", "android", "--fcm-service-account", "/a.json", "--no-fcm-service-account"], "contradict"),
            ] {
                let refused = try run(arguments)
                #expect(refused.status != 0 && refused.standardError.contains(reason), "\(arguments): \(refused.standardError)")
            }
            #expect(try run(["apps", "update", "android", "--environment", "sandbox"]).status == 0)
            #expect(try run(["apps", "disable", "white-label.1"]).status == 0)
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    "INSERT INTO push_queue (app, device_token, payload) SELECT 'beta', lpad(to_hex(g), 64, '0'), '{}' FROM generate_series(1, 2) g",
                    logger: TestDatabase.logger
                )
            }
            let listed = try run(["apps", "list"])
            let lines = listed.standardOutput.split(separator: "\n").map(String.init)
            #expect(lines.count == 5, "\(listed.standardOutput)")
            #expect(
                lines.contains { $0 == "beta\tcom.example.Beta2\tproduction\thttp2\tcertificate /etc/pushchat/beta.pem\tenabled\t2" }
            )
            #expect(lines.contains { $0.hasPrefix("default\t(configuration)") && $0.hasSuffix("\tenabled\t0") })
            #expect(
                lines.contains {
                    $0.hasPrefix("white-label.1\tcom.example.White\tproduction\tbinary\tcertificate ") && $0.contains("\tdisabled ")
                }
            )
            #expect(try run(["apps", "enable", "white-label.1"]).status == 0)

            let created = try run(["keys", "create", "beta-backend", "--app", "beta"])
            #expect(created.status == 0, "\(created.standardError)")
            #expect(created.standardOutput.contains("Created key beta-backend for app beta"))
            #expect(try run(["keys", "list"]).standardOutput.contains("beta-backend\tbeta\t"))
        }
    }

    /// An app over HTTP/2 signing with a key of its own (BETAKEY001, of the same team).
    static func addApp(_ url: DatabaseURL, _ name: String, bundleID: String) async throws {
        let settings = App.Settings(
            bundleID: bundleID,
            environment: .sandbox,
            transport: .http2,
            credentials: .token(keyFile: TestCertificates.path("AuthKey_BETAKEY001.p8"), keyID: "BETAKEY001", teamID: "DEVTEAM001")
        )
        let added = try await TestDatabase.withConnection(url) { connection in
            try await AppAdmin(connection: connection, logger: TestDatabase.logger).add(name: name, settings: settings)
        }
        #expect(added)
    }

    /// Each app's payloads are bounded by its own interface: the default app's (binary here, 2 KB) was applied to
    /// every app, so an HTTP/2 app's 3 KB alert was refused, and a binary app's accepted on an HTTP/2 default.
    @Test func eachAppsPayloadLimitIsItsOwnInterfaces() async throws {
        try await APIHarness.run { api in
            #expect(APIHarness.configuration(url: api.url).apns.transport == .binary, "development: the default app is binary")
            try await Self.addApp(api.url, "beta", bundleID: "com.example.Beta")
            let main = try await ProviderAPITests.createKey(api.url, name: "main")
            let beta = try await ProviderAPITests.createKey(api.url, name: "beta-backend", app: "beta")
            let alert = String(repeating: "a", count: 3_000)
            let body = #"{"to": {"tokens": ["\#(ProviderAPITests.token(1))"]}, "aps": {"alert": "\#(alert)"}}"#
            let binary = try await ProviderAPITests.call(api, .post, "/v1/notifications", key: main, body)
            #expect(binary.status == 413, "\(binary.json)")
            let http2 = try await ProviderAPITests.call(api, .post, "/v1/notifications", key: beta, body)
            #expect(http2.status == 202, "\(http2.json)")
        }
    }

    /// A key sees and sends only within its app: the same token registered in another app is another device (the
    /// first app's stays as it was), another app's device is 404, `all` reaches only its app's devices (the chat users
    /// belong to the default app), a topic must be its app's bundle id, and a disabled app's key is refused with
    /// nothing written.
    @Test func aKeySeesAndSendsOnlyWithinItsApp() async throws {
        try await APIHarness.run { api in
            try await Self.addApp(api.url, "beta", bundleID: "com.example.Beta")
            let main = try await ProviderAPITests.createKey(api.url, name: "main")
            let beta = try await ProviderAPITests.createKey(api.url, name: "beta-backend", app: "beta")
            let shared = ProviderAPITests.token(0x01)
            let betaToken = ProviderAPITests.token(0x04)
            for (key, token) in [(main, shared), (beta, betaToken)] {
                let registered = try await ProviderAPITests.call(
                    api,
                    .post,
                    "/v1/devices",
                    key: key,
                    #"{"token": "\#(token)", "user": "alice"}"#
                )
                #expect(registered.status == 201)
            }
            let mainDevice = "SELECT string_agg(user_ref || '/' || registered_by, ',') FROM devices WHERE app = 'default'"
            let mainBefore = try await TestDatabase.scalar(api.url, PostgresQuery(unsafeSQL: mainDevice), as: String.self)
            let second = try await ProviderAPITests.call(
                api,
                .post,
                "/v1/devices",
                key: beta,
                #"{"token": "\#(shared)", "user": "mallory"}"#
            )
            #expect(second.status == 201, "the same token in another app is another device: \(second.json)")
            #expect(
                try await TestDatabase.scalar(api.url, PostgresQuery(unsafeSQL: mainDevice), as: String.self) == mainBefore,
                "the first app's device is untouched"
            )
            let again = try await ProviderAPITests.call(api, .post, "/v1/devices", key: main, #"{"token": "\#(shared)", "user": "alice"}"#)
            #expect(again.status == 200, "its own app registers it again")
            #expect(
                try await ProviderAPITests.call(
                    api,
                    .post,
                    "/v1/devices",
                    key: main,
                    #"{"token": "\#(ProviderAPITests.token(0x02))", "user": "bob"}"#
                )
                .status == 201
            )
            #expect(try await api.count("devices") == 4)
            let listed = try await ProviderAPITests.call(api, .get, "/v1/devices?user=bob", key: beta)
            #expect((listed.json["devices"] as? [Any])?.isEmpty == true, "another app's user has no devices here")
            let foreign = try await ProviderAPITests.call(api, .delete, "/v1/devices/\(ProviderAPITests.token(0x02))", key: beta)
            #expect(foreign.status == 404, "another app's device is not found")
            // A chat user of the default app.
            try await TestDatabase.withConnection(api.url) { connection in
                try await connection.query(
                    """
                    INSERT INTO active_users (udid, device_token, nickname, secret_code)
                    VALUES (\(String(repeating: "c", count: 40)), \(ProviderAPITests.token(0x03)), 'chat', 'room')
                    """,
                    logger: TestDatabase.logger
                )
            }
            let toAll = try await ProviderAPITests.call(
                api,
                .post,
                "/v1/notifications",
                key: beta,
                #"{"to": {"all": true}, "aps": {"alert": "beta"}}"#
            )
            #expect(toAll.status == 202, "\(toAll.json)")
            #expect(toAll.json["recipients"] as? Int == 2, "beta's two devices, not the default app's devices or chat users")
            let mainAll = try await ProviderAPITests.call(
                api,
                .post,
                "/v1/notifications",
                key: main,
                #"{"to": {"all": true}, "aps": {"alert": "main"}}"#
            )
            #expect(mainAll.json["recipients"] as? Int == 3, "the default app's two devices and its chat user")
            let rows = try await TestDatabase.scalar(
                api.url,
                "SELECT string_agg(app || ':' || right(device_token, 2), ',' ORDER BY app, device_token) FROM push_deliveries",
                as: String.self
            )
            #expect(rows == "beta:01,beta:04,default:01,default:02,default:03")
            let id = try #require(mainAll.json["id"] as? String)
            #expect(try await ProviderAPITests.call(api, .get, "/v1/notifications/\(id)", key: beta).status == 404)
            let wrongTopic = try await ProviderAPITests.call(
                api,
                .post,
                "/v1/notifications",
                key: beta,
                #"{"to": {"tokens": ["\#(betaToken)"]}, "topic": "com.example.PushChat", "aps": {"alert": "x"}}"#
            )
            #expect(
                wrongTopic.status == 400 && (wrongTopic.json["reason"] as? String)?.contains("com.example.Beta") == true,
                "\(wrongTopic.json)"
            )
            let voip = try await ProviderAPITests.call(
                api,
                .post,
                "/v1/notifications",
                key: beta,
                #"{"to": {"tokens": ["\#(betaToken)"]}, "topic": "com.example.Beta.voip", "push_type": "voip", "aps": {"alert": "call"}}"#
            )
            #expect(voip.status == 202, "\(voip.json)")

            try await TestDatabase.withConnection(api.url) { connection in
                _ = try await AppAdmin(connection: connection, logger: TestDatabase.logger).setDisabled(name: "beta", true)
            }
            let before = try await ProviderAPITests.snapshot(api)
            let disabled = try await ProviderAPITests.call(
                api,
                .post,
                "/v1/notifications",
                key: beta,
                #"{"to": {"all": true}, "aps": {"alert": "x"}}"#
            )
            #expect(disabled.status == 403)
            #expect((disabled.json["reason"] as? String)?.contains("app beta is disabled") == true, "\(disabled.json)")
            #expect(try await ProviderAPITests.snapshot(api) == before)
        }
    }

    /// A token Apple called invalid for one app prunes that app's device only: a report for beta leaves the default
    /// app's device and chat user with that token, and deletes beta's own device.
    @Test func anInvalidTokenPrunesOnlyItsAppsDevice() async throws {
        try await PushHarness.run { harness in
            try await Self.addApp(harness.url, "beta", bundleID: "com.example.Beta")
            let token = PushHarness.token(7)
            let betaToken = PushHarness.token(8)
            try await TestDatabase.withConnection(harness.url) { connection in
                for statement: PostgresQuery in [
                    "INSERT INTO devices (app, device_token, registered_by, updated_at) VALUES ('default', \(token), 'k', now() - interval '1 day')",
                    "INSERT INTO devices (app, device_token, registered_by, updated_at) VALUES ('beta', \(betaToken), 'k', now() - interval '1 day')",
                    // The same token in beta too: another device (the keys are (app, device_token) on a new database).
                    "INSERT INTO devices (app, device_token, registered_by, updated_at) VALUES ('beta', \(token), 'k', now() - interval '1 day')",
                    """
                    INSERT INTO active_users (udid, device_token, nickname, secret_code, token_updated_at)
                    VALUES (\(String(repeating: "d", count: 40)), \(token), 'chat', 'room', now() - interval '1 day')
                    """,
                ] {
                    try await connection.query(statement, logger: TestDatabase.logger)
                }
            }
            try await TestDatabase.withFeedbackStore(harness.url) { store in
                try await store.client.query(
                    InvalidTokenUpsert.statement(
                        [
                            PushQueue.InvalidToken(token: token, reportedAt: nil, source: "http2 410 Unregistered", app: "beta"),
                            PushQueue.InvalidToken(token: betaToken, reportedAt: nil, source: "http2 410 Unregistered", app: "beta"),
                        ],
                        keyedByToken: false
                    ),
                    logger: TestDatabase.logger
                )
                let pending = try await store.pendingReports()
                #expect(pending.apps == ["beta", "beta"] && pending.wouldDelete == 2)
                let applied = try await store.applyInvalidTokens(pending)
                #expect(applied.daemon.deleted == 2)
            }
            let left = try await TestDatabase.scalar(
                harness.url,
                "SELECT string_agg(app, ',' ORDER BY app) || '|' || (SELECT count(*) FROM active_users) FROM devices",
                as: String.self
            )
            #expect(left == "default|1", "beta's devices went; the default app's device with the same token and the chat user stay")
        }
    }

    /// Queues `count` rows for `app` (tokens from `start`), as the API would.
    static func queue(_ harness: PushHarness, app: String, _ count: Int, from start: Int) async throws {
        try await TestDatabase.withConnection(harness.url) { connection in
            try await connection.query(
                """
                INSERT INTO push_queue (app, device_token, payload)
                SELECT \(app), lpad(to_hex(g), 64, '0'), '{"aps":{"alert":"hi"}}' FROM generate_series(\(start), \(start + count - 1)) g
                """,
                logger: TestDatabase.logger
            )
        }
    }

    /// Three apps on one HTTP/2 daemon: the default one (the configuration's key and topic), beta (its own bundle
    /// id, token key, over HTTP/2) and legacy (a client certificate over the binary interface, the passphrase from a
    /// file); each notification goes out with its own app's topic and transport. An app whose key file is missing is
    /// refused with one line and an alarm in /readyz, its rows stay queued, and the others send.
    @Test func eachAppSendsWithItsOwnCredentialsAndABrokenOneIsAlarmed() async throws {
        try await PushHarness.run { harness in
            try await Self.addApp(harness.url, "beta", bundleID: Self.betaTopic)
            let passphrase = FileManager.default.temporaryDirectory.appendingPathComponent("pushchat-passphrase-\(UUID().uuidString)")
            try Data((TestCertificates.passphrase + "\n").utf8).write(to: passphrase)
            defer { try? FileManager.default.removeItem(at: passphrase) }
            try await TestDatabase.withConnection(harness.url) { connection in
                let admin = AppAdmin(connection: connection, logger: TestDatabase.logger)
                let legacy = App.Settings(
                    bundleID: "com.example.Legacy",
                    environment: .production,
                    transport: .binary,
                    credentials: .certificate(path: TestCertificates.path("ck.pem"), passphraseFile: passphrase.path)
                )
                let broken = App.Settings(
                    bundleID: "com.example.Broken",
                    environment: .sandbox,
                    transport: .http2,
                    credentials: .token(keyFile: "/nonexistent/AuthKey_DEVKEY0001.p8", keyID: "DEVKEY0001", teamID: "DEVTEAM001")
                )
                let added = [try await admin.add(name: "legacy", settings: legacy), try await admin.add(name: "broken", settings: broken)]
                #expect(added == [true, true])
            }
            try await harness.queue(3)
            try await Self.queue(harness, app: "beta", 3, from: 0x100)
            try await Self.queue(harness, app: "legacy", 3, from: 0x200)
            try await Self.queue(harness, app: "broken", 2, from: 0x300)
            let (configuration, _) = try harness.http2()
            try await harness.withDaemonStatus(configuration) { port in
                try await harness.waitUntilAllSent(9)
                try await harness.waitUntil("the broken app is alarmed") {
                    try await LoopbackHTTP.get(port: port, path: "/readyz").status == 503
                }
                let readiness = try await LoopbackHTTP.get(port: port, path: "/readyz")
                #expect(readiness.body.contains("app broken cannot send"), "\(readiness.body)")
                #expect(readiness.body.contains("/nonexistent/AuthKey_DEVKEY0001.p8"), "\(readiness.body)")
                try await harness.waitUntil("the pending rows are sampled by app") {
                    let metrics = try await LoopbackHTTP.scrape(port: port)
                    // The broken app's rows wait for its files (deferred): not late, but the app is unusable.
                    return metrics[#"pushchat_app_usable{app="broken"}"#] == 0
                        && metrics[#"pushchat_app_usable{app="beta"}"#] == 1
                        && metrics[#"pushchat_app_pending{app="beta",platform="apns"}"#] == 0
                        && metrics[#"pushchat_app_oldest_pending_age_seconds{app="beta",platform="fcm"}"#] == 0
                }
                let metrics = try await LoopbackHTTP.scrape(port: port)
                for app in ["default", "beta", "legacy"] {
                    #expect(metrics[#"pushchat_app_sent{app="\#(app)"}"#] == 3, "\(app)")
                    #expect(
                        metrics[#"pushchat_gateway_connected{app="\#(app)",platform="apns"}"#] == 1,
                        "\(app)'s connection stays open until idle"
                    )
                }
                // Each certificate app's expiry, for the alert a month ahead; none for a token app.
                let legacyExpiry = try ClientIdentity.load(path: TestCertificates.path("ck.pem"), passphrase: TestCertificates.passphrase)
                    .notValidAfter
                #expect(metrics[#"pushchat_app_certificate_expiry_seconds{app="legacy"}"#] == legacyExpiry.timeIntervalSince1970)
                #expect(metrics[#"pushchat_app_certificate_expiry_seconds{app="beta"}"#] == nil)
                #expect(metrics[#"pushchat_app_sent{app="broken"}"#] == nil)
                #expect(metrics["pushchat_push_sent"] == 9)
                #expect(metrics["pushchat_database_up"] == 1)
                #expect(metrics[#"pushchat_build_info{version="development"}"#] == 1)
            }
            let accepted = harness.simulator.state.accepted
            let byToken = Dictionary(grouping: accepted, by: { Int($0.token, radix: 16) ?? -1 })
            #expect(byToken.count == 9 && accepted.count == 9, "each row once")
            for n in 1...3 {
                #expect(byToken[n]?.first?.topic == PushHarness.topic)
                #expect(byToken[n]?.first?.keyID == "DEVKEY0001", "the configuration's key")
            }
            for n in 0x100..<0x103 {
                #expect(byToken[n]?.first?.topic == Self.betaTopic)
                #expect(byToken[n]?.first?.keyID == "BETAKEY001", "beta's own key")
            }
            for n in 0x200..<0x203 { #expect(byToken[n]?.first?.topic == nil, "over the binary interface (no topic on the wire)") }
            #expect(try await harness.count("app = 'broken' AND time_sent IS NULL AND time_failed IS NULL") == 2, "its rows stay queued")
        }
    }

    /// `chat_app` names the app the chat API belongs to: its messages are queued as that app's, only its keys reach
    /// the chat users (by room or all), and the default app's keys no longer do.
    @Test func theChatAPIBelongsToTheAppChatAppNames() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await Self.addApp(url, "beta", bundleID: Self.betaTopic)
            var configuration = APIHarness.configuration(url: url)
            configuration.chatApp = "beta"
            try await APIHarness.run(configuration: configuration) { api in
                for n in 1...2 {
                    let joined = try await api.post([
                        "cmd": "join", "udid": Device.udid(n), "token": Device.token(n), "name": "U\(n)", "code": "room",
                    ])
                    #expect(joined.status == .ok)
                }
                #expect(try await api.post(["cmd": "message", "udid": Device.udid(1), "text": "hi"]).status == .ok)
                let chatRows = try await TestDatabase.scalar(
                    url,
                    "SELECT string_agg(DISTINCT app, ',') FROM push_deliveries",
                    as: String.self
                )
                #expect(chatRows == "beta", "the chat message goes out as beta's")
                let main = try await ProviderAPITests.createKey(url, name: "main")
                let beta = try await ProviderAPITests.createKey(url, name: "beta-backend", app: "beta")
                let fromMain = try await ProviderAPITests.call(
                    api,
                    .post,
                    "/v1/notifications",
                    key: main,
                    #"{"to": {"room": "room"}, "aps": {"alert": "x"}}"#
                )
                #expect(fromMain.json["recipients"] as? Int == 0, "the default app's key does not reach beta's chat users")
                let fromBeta = try await ProviderAPITests.call(
                    api,
                    .post,
                    "/v1/notifications",
                    key: beta,
                    #"{"to": {"room": "room"}, "aps": {"alert": "x"}}"#
                )
                #expect(fromBeta.json["recipients"] as? Int == 2)
            }
        }
    }

    /// `feedback_max_prune` holds per app: beta's reports would delete all of its devices and stay pending, while the
    /// default app's one report (within its limit) is handled in the same run; the run fails naming beta.
    @Test func theFeedbackLimitHoldsPerApp() async throws {
        try await PushHarness.run { harness in
            try await Self.addApp(harness.url, "beta", bundleID: Self.betaTopic)
            try await FeedbackTests.addUsers(harness, Array(1...20), registeredAgo: 2 * 86_400)
            try await TestDatabase.withConnection(harness.url) { connection in
                for n in 101...104 {
                    try await connection.query(
                        "INSERT INTO devices (app, device_token, registered_by, updated_at) VALUES ('beta', \(PushHarness.token(n)), 'k', now() - interval '2 days')",
                        logger: TestDatabase.logger
                    )
                }
                try await connection.query(
                    """
                    INSERT INTO invalid_tokens (app, device_token, reported_at, source)
                    SELECT 'beta', lpad(to_hex(g), 64, '0'), now() - interval '1 hour', 'http2 410 Unregistered' FROM generate_series(101, 104) g
                    UNION ALL SELECT 'default', lpad(to_hex(1), 64, '0'), now() - interval '1 hour', 'http2 410 Unregistered'
                    """,
                    logger: TestDatabase.logger
                )
            }
            var environment = harness.environment(harness.configuration())
            environment["PUSHCHAT_APNS_FEEDBACK"] = "127.0.0.1:\(harness.ports.feedback)"
            environment["PUSHCHAT_FEEDBACK_MAX_PRUNE"] = "10%"  // default: 2 of 20; beta: 0 of 4
            let run = try Executable(name: "pushchat-feedback").run(["development"], environment: environment)
            #expect(run.status == 1)
            #expect(run.standardError.contains("would delete 4 of 4 users with a token of app beta"), "\(run.standardError)")
            #expect(!run.standardError.contains("of app default"))
            let left = try await TestDatabase.scalar(
                harness.url,
                """
                SELECT (SELECT count(*) FROM active_users) || '/' || (SELECT count(*) FROM devices WHERE app = 'beta') || '/'
                    || (SELECT string_agg(app, ',' ORDER BY app) FROM invalid_tokens WHERE processed_at IS NULL)
                """,
                as: String.self
            )
            #expect(left == "19/4/beta,beta,beta,beta", "the default app's report handled, beta's kept pending")
        }
    }

    /// An app on the binary interface has its own feedback service, read with its certificate: its tuples delete its
    /// devices only (a tuple naming the default app's device, here on HTTP/2 without a feedback service, leaves it).
    @Test func theFeedbackJobReadsEachBinaryAppsService() async throws {
        try await PushHarness.run { harness in
            let passphrase = FileManager.default.temporaryDirectory.appendingPathComponent("pushchat-passphrase-\(UUID().uuidString)")
            try Data(TestCertificates.passphrase.utf8).write(to: passphrase)
            defer { try? FileManager.default.removeItem(at: passphrase) }

            try await TestDatabase.withConnection(harness.url) { connection in
                let legacy = App.Settings(
                    bundleID: "com.example.Legacy",
                    environment: .production,
                    transport: .binary,
                    credentials: .certificate(path: TestCertificates.path("ck.pem"), passphraseFile: passphrase.path)
                )
                _ = try await AppAdmin(connection: connection, logger: TestDatabase.logger).add(name: "legacy", settings: legacy)
                for (app, n) in [("default", 9), ("legacy", 10)] {
                    try await connection.query(
                        """
                        INSERT INTO devices (app, device_token, registered_by, updated_at)
                        VALUES (\(app), \(PushHarness.token(n)), 'k', now() - interval '2 days')
                        """,
                        logger: TestDatabase.logger
                    )
                }
            }
            harness.simulator.state.setFeedback([9, 10].map { FeedbackTests.tuple($0, at: FeedbackTests.dayAgo) })
            let (configuration, _) = try harness.http2()
            let report = try await FeedbackTests.job(harness, configuration: configuration).run()
            #expect(report.tuplesRead == 2)
            #expect(report.deletedByFeedback == 1)
            let left = try await TestDatabase.scalar(harness.url, "SELECT string_agg(app, ',') FROM devices", as: String.self)
            #expect(left == "default", "the legacy app's device went, the default app's stayed")
        }
    }
}
