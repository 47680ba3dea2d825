import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import PostgresNIO
import Testing

@testable import API
@testable import APIServer
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Storage
@testable import Support

/// The real API server (`pushchat-api serve`'s application) on a loopback port, backed by a fresh database.
struct APIHarness: Sendable {
    let client: any TestClientProtocol
    /// The owner's URL, for the tests' own queries (the API itself connects as the services' role on a fresh database).
    let url: DatabaseURL
    /// The API's metrics listener (loopback, apart from the API's port).
    let metricsPort: Int

    /// The API on a loopback port, without abuse limits (tests send bursts; the limits have their own tests).
    static func configuration(url: DatabaseURL, mode: Mode = .development) -> Configuration {
        var configuration = Configuration(mode: mode, databaseURL: url, apiHost: "127.0.0.1", apiPort: 0)
        configuration.limits = .unlimited
        configuration.exposure.metricsPort = 0
        return configuration
    }

    /// Runs `body` against an API server on a fresh database.
    static func run(mode: Mode = .development, _ body: @escaping @Sendable (APIHarness) async throws -> Void) async throws {
        try await TestDatabase.withFreshDatabase { url in
            // The API connects as the services' role; the tests' own queries (`url`) as the owner.
            try await run(configuration: configuration(url: TestDatabase.service(url), mode: mode), ownerURL: url, body)
        }
    }

    static func run(
        configuration: Configuration,
        databaseTimeout: Duration = .seconds(10),
        ownerURL: DatabaseURL? = nil,
        _ body: @escaping @Sendable (APIHarness) async throws -> Void
    ) async throws {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = try APIApplication.build(
            configuration: configuration,
            logger: TestDatabase.logger,
            databaseTimeout: databaseTimeout,
            onMetricsRunning: { continuation.yield($0) }
        )
        try await app.test(.live) { client in
            var iterator = ports.makeAsyncIterator()
            let metricsPort = await iterator.next() ?? 0
            try await body(APIHarness(client: client, url: ownerURL ?? configuration.databaseURL, metricsPort: metricsPort))
        }
    }

    /// POSTs the fields urlencoded, in order, to `/api.php`.
    @discardableResult
    func post(_ fields: KeyValuePairs<String, String>, path: String = "/api.php") async throws -> TestResponse {
        let body = fields.map { "\(Self.encode($0.key))=\(Self.encode($0.value))" }.joined(separator: "&")
        return try await post(body: ByteBuffer(string: body), contentType: "application/x-www-form-urlencoded", path: path)
    }

    func post(body: ByteBuffer, contentType: String?, path: String = "/api.php") async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let contentType { headers[.contentType] = contentType }
        return try await client.executeRequest(uri: path, method: .post, headers: headers, body: body)
    }

    /// POSTs on a new connection of its own (for concurrent bursts); the status code.
    func postAlone(_ form: String, headers: String = "") async throws -> (status: Int, retryAfter: String?) {
        let request =
            "POST /api.php HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n\(headers)"
            + "Content-Length: \(form.utf8.count)\r\nConnection: close\r\n\r\n\(form)"
        let response = String(buffer: try await TLSTestClient.exchange(port: client.port!, tls: nil, send: ByteBuffer(string: request)))
        let status = Int(response.split(separator: " ").dropFirst().first ?? "") ?? 0
        let retryAfter = response.split(separator: "\r\n").first { $0.lowercased().hasPrefix("retry-after:") }
            .map { $0.dropFirst("retry-after:".count).trimmingCharacters(in: .whitespaces) }
        return (status, retryAfter)
    }

    func get(_ path: String) async throws -> TestResponse {
        try await client.executeRequest(uri: path, method: .get, headers: [:], body: nil)
    }

    /// A fingerprint of every row of the application tables, to prove a request wrote nothing.
    func snapshot() async throws -> String {
        try await TestDatabase.scalar(
            url,
            """
            SELECT concat_ws('|',
                (SELECT coalesce(md5(string_agg(u::text, ',' ORDER BY udid)), '-') FROM active_users u),
                (SELECT coalesce(md5(string_agg(q::text, ',' ORDER BY message_id)), '-') FROM push_deliveries q),
                (SELECT coalesce(md5(string_agg(m::text, ',' ORDER BY id)), '-') FROM messages m))
            """,
            as: String.self
        )
    }

    func count(_ table: String) async throws -> Int64 {
        try await TestDatabase.scalar(url, PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table)"), as: Int64.self)
    }

    static func encode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._*")
        return (text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text).replacingOccurrences(of: "%20", with: "+")
    }
}

extension APIHarness {
    /// `GET /metrics` on the metrics listener: the status line's code, the content type and the body.
    func metrics() async throws -> (status: Int, contentType: String?, body: String) {
        let request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        let reply = String(buffer: try await TLSTestClient.exchange(port: metricsPort, tls: nil, send: ByteBuffer(string: request)))
        let head = reply.components(separatedBy: "\r\n\r\n").first ?? ""
        let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        let contentType = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-type:") }
            .map { String($0.dropFirst("content-type:".count)).trimmingCharacters(in: .whitespaces) }
        return (status, contentType, try await LoopbackHTTP.get(port: metricsPort, path: "/metrics").body)
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }
    var errorDescription: String? { headers[HTTPField.Name("X-Error-Description")!] }
}

/// Test devices: udid and token derived from a number.
enum Device {
    static func udid(_ n: Int) -> String { String(format: "%040x", n) }
    static func token(_ n: Int) -> String { String(format: "%064x", n + 0xabc) }
}
