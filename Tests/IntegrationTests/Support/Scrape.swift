import Foundation
import NIOCore
import Testing

/// A Prometheus text exposition, parsed: the value of each sample line by its series (`name{labels}`).
struct Scrape: Sendable {
    let samples: [String: Double]
    let text: String

    init(_ text: String) {
        self.text = text
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            samples[String(line[..<space])] = value
        }
        self.samples = samples
    }

    /// The value of `series` (e.g. `pushchat_push_sent` or `pushchat_api_requests{command="join",status="200"}`); nil if
    /// the exposition has no such sample (so a metric that is not exported never passes for 0).
    subscript(_ series: String) -> Double? { samples[series] }

    /// The value of `series` for comparisons: a missing sample is recorded as an issue and compares false (NaN).
    func number(_ series: String, sourceLocation: SourceLocation = #_sourceLocation) -> Double {
        guard let value = samples[series] else {
            Issue.record("\(series) is not exported", sourceLocation: sourceLocation)
            return .nan
        }
        return value
    }

    /// The sum of every series of `name` whose labels include all of `labels`.
    func sum(_ name: String, where labels: [String: String] = [:]) -> Double {
        samples.filter { key, _ in
            guard key == name || key.hasPrefix(name + "{") else { return false }
            return labels.allSatisfy { key.contains("\($0.key)=\"\($0.value)\"") }
        }.values.reduce(0, +)
    }
}

/// A plain HTTP/1.1 GET on loopback (the push daemon's status listener).
enum LoopbackHTTP {
    static func get(port: Int, path: String) async throws -> (status: Int, body: String) {
        let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        let reply = try await TLSTestClient.exchange(port: port, tls: nil, send: ByteBuffer(string: request))
        let text = String(buffer: reply)
        guard let head = text.range(of: "\r\n\r\n"), let status = Int(text.split(separator: " ").dropFirst().first ?? "") else {
            Issue.record("not an HTTP response: \(text.prefix(200))")
            return (0, "")
        }
        var body = String(text[head.upperBound...])
        if text[..<head.lowerBound].lowercased().contains("transfer-encoding: chunked") { body = dechunk(body) }
        return (status, body)
    }

    static func scrape(port: Int) async throws -> Scrape {
        Scrape(try await get(port: port, path: "/metrics").body)
    }

    private static func dechunk(_ body: String) -> String {
        var rest = Substring(body)
        var output = ""
        while let lineEnd = rest.range(of: "\r\n"), let size = Int(rest[..<lineEnd.lowerBound], radix: 16), size > 0 {
            let start = lineEnd.upperBound
            let bytes = Array(rest[start...].utf8.prefix(size))
            output += String(decoding: bytes, as: UTF8.self)
            rest = Substring(String(decoding: Array(rest[start...].utf8.dropFirst(size + 2)), as: UTF8.self))
        }
        return output
    }
}
