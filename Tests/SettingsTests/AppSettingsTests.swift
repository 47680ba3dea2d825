import Foundation
import Testing

@testable import Settings

/// What an app's settings make of the daemon's APNs settings (``APNsSettings/forApp(_:)``), and their checks.
@Suite struct AppSettingsTests {
    static let beta = App.Settings(
        bundleID: "com.example.Beta",
        environment: .sandbox,
        transport: .http2,
        credentials: .token(keyFile: "/etc/pushchat/AuthKey_ABC123DEFG.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
    )

    @Test func anAppTakesItsEnvironmentsHostsUnlessTheConfigurationNamesThem() throws {
        let production = try KeyFileNameTests.settings(["PUSHCHAT_APNS_CERTIFICATE": "/etc/pushchat/ck.pem"])
        #expect(production.namedEndpoints.isEmpty)
        let beta = try production.forApp(Self.beta)
        #expect(beta.host == Endpoint(host: "api.sandbox.push.apple.com", port: 443), "the sandbox app goes to the sandbox")
        #expect(beta.gateway == Endpoint(host: "gateway.sandbox.push.apple.com", port: 2195))
        #expect(beta.topic == "com.example.Beta" && beta.transport == .http2)
        #expect(beta.keyFile == "/etc/pushchat/AuthKey_ABC123DEFG.p8" && beta.keyID == "ABC123DEFG" && beta.teamID == "DEF123GHIJ")
        #expect(beta.certificate == nil, "the configuration's certificate is not the app's")

        let simulator = try KeyFileNameTests.settings(["PUSHCHAT_APNS_HOST": "127.0.0.1:2197", "PUSHCHAT_APNS_GATEWAY": "127.0.0.1:2195"])
        #expect(simulator.namedEndpoints == [.apnsHost, .apnsGateway])
        let overridden = try simulator.forApp(Self.beta)
        #expect(overridden.host == Endpoint(host: "127.0.0.1", port: 2197), "apns_host holds for every app")
        #expect(overridden.gateway == Endpoint(host: "127.0.0.1", port: 2195))
        #expect(overridden.feedback == Endpoint(host: "feedback.sandbox.push.apple.com", port: 2196))
    }

    /// The file the guide installs as /etc/pushchat/pushchat.json must let each app's environment pick Apple's host:
    /// a host named there would hold for every app and send a sandbox app's tokens to production.
    @Test func theShippedProductionFileLetsEachAppsEnvironmentPickTheHost() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let source = try ConfigurationSource.load(
            mode: .production,
            path: root.appendingPathComponent("config/pushchat.json").path,
            environment: [:]
        )
        let shipped = try Configuration(source: source).apns
        #expect(shipped.namedEndpoints.isEmpty, "the shipped file names no APNs endpoint")
        let sandbox = try shipped.forApp(Self.beta)
        #expect(sandbox.host == Endpoint(host: "api.sandbox.push.apple.com", port: 443))
        #expect(sandbox.gateway == Endpoint(host: "gateway.sandbox.push.apple.com", port: 2195))
        #expect(sandbox.feedback == Endpoint(host: "feedback.sandbox.push.apple.com", port: 2196))
        var live = Self.beta
        live.environment = .production
        let production = try shipped.forApp(live)
        #expect(production.host == Endpoint(host: "api.push.apple.com", port: 443))
        #expect(production.gateway == Endpoint(host: "gateway.push.apple.com", port: 2195))
        #expect(production.feedback == Endpoint(host: "feedback.push.apple.com", port: 2196))
    }

    @Test func aCertificatesPassphraseComesFromItsFileAndAnUnreadableFileIsTheReason() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pushchat-pass-\(UUID().uuidString)")
        try Data("s3cret\r\n".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        var legacy = Self.beta
        legacy.transport = .binary
        legacy.credentials = .certificate(path: "/etc/pushchat/legacy.pem", passphraseFile: file.path)
        let apns = try APNsSettings(mode: .production).forApp(legacy)
        #expect(apns.passphrase?.value == "s3cret")
        #expect(apns.certificate == "/etc/pushchat/legacy.pem" && apns.keyFile == nil && apns.keyID == nil)
        legacy.credentials = .certificate(path: "/etc/pushchat/legacy.pem", passphraseFile: "/nonexistent/pass")
        #expect {
            try APNsSettings(mode: .production).forApp(legacy)
        } throws: { error in
            (error as? AppUnusable)?.reason.contains("/nonexistent/pass") == true
        }
    }

    @Test func namesBundleIDsAndAppleIDsAreChecked() {
        #expect(App.isValidName("white-label.2") && App.isValidName("a"))
        #expect(
            !App.isValidName("Beta") && !App.isValidName("-x") && !App.isValidName("")
                && !App.isValidName(String(repeating: "a", count: 65))
        )
        #expect(App.isValidBundleID("com.example.Push-Chat") && !App.isValidBundleID("nodots") && !App.isValidBundleID("com..x"))
        #expect(App.isValidAppleID("ABC123DEFG") && !App.isValidAppleID("abc123defg") && !App.isValidAppleID("ABC123DEF"))
        var binaryWithKey = Self.beta
        binaryWithKey.transport = .binary
        #expect(binaryWithKey.problem?.contains("certificate only") == true)
        var relative = Self.beta
        relative.credentials = .certificate(path: "ck.pem", passphraseFile: nil)
        #expect(relative.problem?.contains("absolute path") == true)
        #expect(Self.beta.problem == nil)
    }
}
