import Foundation
import Logging
import NIOCore
import Testing

@testable import Simulator
@testable import Support
@testable import WebPush

/// The simulator's browsers and their push service, over real TLS and HTTP/2 on loopback, spoken to by senders that
/// are not this project's: curl (nghttp2) carrying messages that Python's http_ece encrypted and a VAPID token that
/// Python's `cryptography` signed, and curl carrying the project's own.
@Suite struct WebPushSimulatorTests {
    /// Runs a simulator with the push service and the status page.
    static func withSimulator(
        _ options: SimulatorConfiguration.WebPushOptions = .init(),
        _ body: (APNsSimulator.Ports, APNsSimulator) async throws -> Void
    ) async throws {
        var configuration = SimulatorTests.configuration()
        configuration.statusPort = 0
        configuration.webPushPort = 0
        configuration.webPush = options
        let simulator = try APNsSimulator(configuration: configuration, logger: Logger(label: "webpush-test"))
        try await simulator.withRunning { ports in try await body(ports, simulator) }
    }

    /// A browser subscribes on the status page (`POST /browsers`): its `PushSubscription.toJSON()`.
    static func subscribe(status: Int, app: String, applicationServerKey: String) async throws -> String {
        let body = #"{"app":"\#(app)","application_server_key":"\#(applicationServerKey)"}"#
        let request =
            "POST /browsers HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
        let answer = String(buffer: try await TLSTestClient.exchange(port: status, tls: nil, send: ByteBuffer(string: request)))
        #expect(answer.hasPrefix("HTTP/1.1 201"), "\(answer)")
        return String(answer[answer.range(of: "\r\n\r\n")!.upperBound...]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `curl --http2` (or `version`) POSTs `body` to `endpoint` with `headers`: the status and the HTTP version it spoke.
    static func curl(
        _ endpoint: String,
        headers: [String: String],
        body: [UInt8],
        version: String = "--http2"
    ) throws -> (status: Int, version: String) {
        let file = NSTemporaryDirectory() + "webpush-body-\(UUID().uuidString)"
        try Data(body).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        var arguments = ["curl", "--silent", version, "--cacert", TestCertificates.path("ca.pem"), "-o", "/dev/null"]
        arguments += ["-w", "%{http_code} %{http_version}", "--data-binary", "@" + file]
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { arguments += ["-H", "\(name): \(value)"] }
        let result = try Executable.runTool(arguments + [endpoint])
        let parts = result.split(separator: " ")
        return (Int(parts.first ?? "") ?? 0, parts.count > 1 ? String(parts[1]) : "")
    }

    @Test func aMessageFromAnIndependentSenderReachesTheBrowsersLockScreen() async throws {
        try await Self.withSimulator { ports, simulator in
            let status = try #require(ports.status)
            let vapid = VAPIDKey.generate()
            let json = try await Self.subscribe(status: status, app: "beta", applicationServerKey: vapid.publicKey)
            let subscription = try WebPushSubscription(json: Array(json.utf8))
            #expect(subscription.origin == "https://127.0.0.1:\(try #require(ports.webPush))")
            // Python encrypts and signs, curl sends.
            let file = NSTemporaryDirectory() + "webpush-python-\(UUID().uuidString)"
            defer { try? FileManager.default.removeItem(atPath: file) }
            let message = WebPushMessage(title: "Ann", body: "from Python ✓", navigate: "https://chat.example/")
            let request =
                #"{"subscription":\#(json),"vapid_pem":\#(JSONText.quoted(vapid.pem)),"audience":"\#(subscription.origin)","message":\#(JSONText.quoted(message.json))}"#
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Support/webpush_send.py").path
            let authorization = try Executable.runTool(["python3", script, file], input: request + "\n")
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let body = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
            let headers = ["TTL": "60", "Content-Encoding": "aes128gcm", "Authorization": authorization, "Urgency": "high"]
            let sent = try Self.curl(subscription.endpoint.absoluteString, headers: headers, body: body)
            #expect(sent.status == 201 && sent.version == "2", "\(sent)")
            // A sender without HTTP/2 (pywebpush's requests, curl --http1.1): the same push service over HTTP/1.1.
            let overHTTP1 = try Self.curl(subscription.endpoint.absoluteString, headers: headers, body: body, version: "--http1.1")
            #expect(overHTTP1.status == 201 && overHTTP1.version == "1.1", "\(overHTTP1)")
            let screens = try await TLSTestClient.get(port: status, path: "/screens")
            #expect(screens.contains("data-platform=\"browser\""), "\(screens)")
            #expect(screens.contains("from Python ✓") && screens.contains(">beta<"))
            #expect(simulator.state.recent(limit: 1).first?.format == "web")
            // Unsubscribed: 410 Gone.
            let id = subscription.endpoint.lastPathComponent
            let deleted = String(
                buffer: try await TLSTestClient.exchange(
                    port: status,
                    tls: nil,
                    send: ByteBuffer(string: "DELETE /browsers/\(id) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                )
            )
            #expect(deleted.hasPrefix("HTTP/1.1 204"), "\(deleted)")
            #expect(try Self.curl(subscription.endpoint.absoluteString, headers: headers, body: body).status == 410)
        }
    }

    @Test func theProjectsOwnMessageAndTheForcedAnswers() async throws {
        var options = SimulatorConfiguration.WebPushOptions()
        options.answer = 503
        for answer in [nil, 503] as [Int?] {
            options.answer = answer
            try await Self.withSimulator(options) { ports, _ in
                let status = try #require(ports.status)
                let vapid = VAPIDKey.generate()
                let json = try await Self.subscribe(status: status, app: "default", applicationServerKey: vapid.publicKey)
                let subscription = try WebPushSubscription(json: Array(json.utf8))
                let body = try ContentEncryption.encrypt(
                    Array(WebPushMessage(title: "Bo", body: "hi", navigate: "https://chat.example/").json.utf8),
                    for: subscription
                )
                let token = VAPIDToken(
                    audience: subscription.origin,
                    expires: Int64(Date().timeIntervalSince1970) + 3600,
                    subject: "mailto:a@b.c"
                )
                var headers = ["TTL": "0", "Content-Encoding": "aes128gcm", "Authorization": try token.authorization(signedWith: vapid)]
                #expect(try Self.curl(subscription.endpoint.absoluteString, headers: headers, body: body).status == (answer ?? 201))
                headers["Authorization"] = try token.authorization(signedWith: VAPIDKey.generate())
                #expect(try Self.curl(subscription.endpoint.absoluteString, headers: headers, body: body).status == (answer ?? 403))
            }
        }
    }
}
