import Foundation
import HTTPTypes
import PostgresNIO
import Testing

@testable import API
@testable import Settings
@testable import Storage
@testable import Support
@testable import WebPush

/// The application server's VAPID key (issue 46): `pushchat-api webpush generate-key` as the service user, the
/// settings that name it, and `GET /v1/webpush/public-key`, what a page subscribes with.
@Suite struct WebPushKeyTests {
    @Test func generateKeyWritesAPrivateFileAndNeverOverwrites() throws {
        let directory = NSTemporaryDirectory() + "pushchat-vapid-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        ServiceUser.own(directory)
        let file = directory + "/vapid.pem"
        let made = try Executable(name: "pushchat-api").run(["webpush", "generate-key", file])
        #expect(made.status == 0, "\(made.standardError)")
        let publicKey = made.standardOutput.split(separator: "\n").last.map(String.init) ?? ""
        let key = try VAPIDKey(file: file)
        #expect(key.publicKey == publicKey, "the printed key is the file's public half")
        let mode = (try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600)
        // openssl reads it too.
        #expect(try Executable.runTool(["openssl", "pkey", "-in", file, "-noout", "-text"]).contains("prime256v1"))
        let again = try Executable(name: "pushchat-api").run(["webpush", "generate-key", file])
        #expect(again.status == 1 && again.standardError.contains("it exists"), "\(again.standardError)")
        #expect(try VAPIDKey(file: file).publicKey == publicKey, "the key is untouched")
    }

    @Test func theSettingsAreChecked() throws {
        func configuration(_ environment: [String: String]) throws -> Configuration {
            try Configuration(
                source: ConfigurationSource(
                    mode: .production,
                    environment: ["PUSHCHAT_DATABASE_URL": "postgres://a@b/c"].merging(environment) { $1 }
                )
            )
        }
        let good = try configuration([
            "PUSHCHAT_WEBPUSH_VAPID_KEY_FILE": "/etc/pushchat/vapid.pem", "PUSHCHAT_WEBPUSH_SUBJECT": "mailto:ops@example.com",
            "PUSHCHAT_WEBPUSH_PRIVATE_HOSTS": "127.0.0.1:8443, [::1]:8443", "PUSHCHAT_WEBPUSH_CA_FILE": "/etc/pushchat/ca.pem",
        ])
        #expect(good.webPush.vapidKeyFile == "/etc/pushchat/vapid.pem" && good.webPush.subject == "mailto:ops@example.com")
        #expect(good.webPush.privateHosts == ["127.0.0.1:8443", "[::1]:8443"] && good.webPush.caFile == "/etc/pushchat/ca.pem")
        for (name, value) in [
            ("PUSHCHAT_WEBPUSH_VAPID_KEY_FILE", "vapid.pem"), ("PUSHCHAT_WEBPUSH_SUBJECT", "ops@example.com"),
            ("PUSHCHAT_WEBPUSH_SUBJECT", "http://example.com"), ("PUSHCHAT_WEBPUSH_PRIVATE_HOSTS", "127.0.0.1"),
        ] {
            #expect(throws: ConfigurationError.self, "\(name)=\(value)") { try configuration([name: value]) }
        }
    }

    @Test func thePublicKeyIsServedToAKeyThatRegistersDevices() async throws {
        let directory = NSTemporaryDirectory() + "pushchat-vapid-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = VAPIDKey.generate()
        let file = directory + "/vapid.pem"
        try key.pem.write(toFile: file, atomically: true, encoding: .utf8)
        try await TestDatabase.withFreshDatabase { url in
            var configuration = APIHarness.configuration(url: TestDatabase.service(url))
            configuration.webPush.vapidKeyFile = file
            try await APIHarness.run(configuration: configuration, ownerURL: url) { api in
                let devices = try await ProviderAPITests.createKey(url, name: "pages", scopes: [.devicesWrite])
                let answer = try await ProviderAPITests.call(api, .get, "/v1/webpush/public-key", key: devices)
                #expect(answer.status == 200 && answer.json["public_key"] as? String == key.publicKey, "\(answer)")
                let sender = try await ProviderAPITests.createKey(url, name: "sender", scopes: [.send])
                #expect(try await ProviderAPITests.call(api, .get, "/v1/webpush/public-key", key: sender).status == 403)
                #expect(try await ProviderAPITests.call(api, .get, "/v1/webpush/public-key", key: nil).status == 401)
                // An app's own key (apps add --vapid-key-file) for its pages; an app without one is told how to give it.
                let appKey = VAPIDKey.generate()
                let appFile = directory + "/beta.pem"
                try appKey.pem.write(toFile: appFile, atomically: true, encoding: .utf8)
                for (name, file) in [("beta", appFile as String?), ("gamma", nil)] {
                    var settings = App.Settings(
                        bundleID: "com.example.\(name)",
                        environment: .sandbox,
                        transport: .http2,
                        credentials: .token(keyFile: "/etc/pushchat/AuthKey_BETAKEY001.p8", keyID: "BETAKEY001", teamID: "DEVTEAM001")
                    )
                    settings.webPushVAPIDKeyFile = file
                    settings.webPushPublicKey = file == nil ? nil : appKey.publicKey
                    let added = try await TestDatabase.withConnection(url) { connection in
                        try await AppAdmin(connection: connection, logger: TestDatabase.logger).add(name: name, settings: settings)
                    }
                    #expect(added)
                }
                let beta = try await ProviderAPITests.createKey(url, name: "beta-pages", scopes: [.devicesWrite], app: "beta")
                let betaAnswer = try await ProviderAPITests.call(api, .get, "/v1/webpush/public-key", key: beta)
                #expect(betaAnswer.status == 200 && betaAnswer.json["public_key"] as? String == appKey.publicKey, "\(betaAnswer)")
                let gamma = try await ProviderAPITests.createKey(url, name: "gamma-pages", scopes: [.devicesWrite], app: "gamma")
                let gammaAnswer = try await ProviderAPITests.call(api, .get, "/v1/webpush/public-key", key: gamma)
                #expect(
                    gammaAnswer.status == 404
                        && (gammaAnswer.json["reason"] as? String ?? "").contains("apps update gamma --vapid-key-file")
                )
            }
            // Without a key file: 404 with a reason.
            try await APIHarness.run(configuration: APIHarness.configuration(url: TestDatabase.service(url)), ownerURL: url) { api in
                let devices = try await ProviderAPITests.createKey(url, name: "pages2", scopes: [.devicesWrite])
                let answer = try await ProviderAPITests.call(api, .get, "/v1/webpush/public-key", key: devices)
                #expect(answer.status == 404 && (answer.json["reason"] as? String ?? "").contains("webpush_vapid_key_file"), "\(answer)")
            }
        }
        // A file that is not a P-256 key: the API does not start.
        let bad = directory + "/bad.pem"
        try "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n".write(toFile: bad, atomically: true, encoding: .utf8)
        var configuration = APIHarness.configuration(url: try DatabaseURL(parsing: "postgres://pushchat@127.0.0.1:1/none"))
        configuration.webPush.vapidKeyFile = bad
        let error = #expect(throws: ConfigurationError.self) {
            _ = try APIApplication.build(configuration: configuration, logger: TestDatabase.logger, databaseTimeout: .seconds(1))
        }
        #expect(error?.key == "webpush_vapid_key_file" && error?.reason.contains("P-256") == true)
    }

    /// `apps add|update --vapid-key-file` as an operator runs it: the key's public half stored for the API (read from
    /// the file, or given with `--vapid-public-key` where the file cannot be read here), `--no-vapid-key-file` removes
    /// it; a wrong key or subject is one line, exit 1, nothing written.
    @Test func theAppsCommandTakesAnAppsVAPIDKey() async throws {
        let directory = NSTemporaryDirectory() + "pushchat-vapid-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = VAPIDKey.generate()
        let file = directory + "/beta.pem"
        try key.pem.write(toFile: file, atomically: true, encoding: .utf8)
        try await TestDatabase.withFreshDatabase { url in
            let api = Executable(name: "pushchat-api")
            func run(_ arguments: [String]) throws -> Executable.Result {
                try api.run(arguments + ["development"], environment: ["PUSHCHAT_DATABASE_URL": url.connectionString])
            }
            func stored() async throws -> String {
                try await TestDatabase.scalar(
                    url,
                    "SELECT concat_ws(' ', webpush_vapid_key_file, webpush_subject, webpush_public_key) FROM apps WHERE name = 'beta'",
                    as: String.self
                )
            }
            let apple = ["--key-file", TestCertificates.path("AuthKey_DEVKEY0001.p8"), "--team-id", "DEVTEAM001"]
            let added = try run(
                ["apps", "add", "beta", "--bundle-id", "com.example.Beta", "--environment", "sandbox"] + apple
                    + ["--vapid-key-file", file, "--vapid-subject", "mailto:ops@example.com"]
            )
            #expect(added.status == 0 && added.standardOutput.contains("and browsers over Web Push"), "\(added.standardError)")
            #expect(try await stored() == "\(file) mailto:ops@example.com \(key.publicKey)")
            #expect(try run(["apps", "list"]).standardOutput.contains("Web Push \(file)"))
            let before = try await stored()
            let other = VAPIDKey.generate().publicKey
            for (arguments, reason) in [
                (["apps", "update", "beta", "--vapid-key-file", "/etc/pushchat/elsewhere.pem"], "give --vapid-public-key"),
                (["apps", "update", "beta", "--vapid-key-file", file, "--vapid-public-key", other], "is not \(file)'s public half"),
                (["apps", "update", "beta", "--vapid-key-file", file, "--vapid-public-key", "BAAA"], "--vapid-public-key"),
                (["apps", "update", "beta", "--vapid-subject", "ops@example.com"], "--vapid-subject must be mailto:"),
                (["apps", "update", "beta", "--vapid-public-key", other], "goes with --vapid-key-file"),
                (["apps", "update", "beta", "--vapid-key-file", file, "--no-vapid-key-file"], "contradict"),
            ] {
                let refused = try run(arguments)
                #expect(refused.status != 0 && refused.standardError.contains(reason), "\(arguments): \(refused.standardError)")
            }
            #expect(try await stored() == before, "nothing written")
            // A file only the push daemon can read: its public half given.
            let elsewhere = try run([
                "apps", "update", "beta", "--vapid-key-file", "/etc/pushchat/beta-vapid.pem", "--vapid-public-key", other,
            ])
            #expect(elsewhere.status == 0, "\(elsewhere.standardError)")
            #expect(try await stored() == "/etc/pushchat/beta-vapid.pem mailto:ops@example.com \(other)")
            #expect(try run(["apps", "update", "beta", "--no-vapid-key-file"]).status == 0)
            #expect(try await stored() == "")
        }
    }
}
