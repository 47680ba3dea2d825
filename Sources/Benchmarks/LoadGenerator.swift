import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Support

/// A small HTTP/1.1 load generator: `connections` keep-alive connections, each sending requests one after another
/// for `duration` (as fast as answers come, or one every `interval` per connection for a steady rate); counts answers
/// by status.
struct LoadGenerator: Sendable {
    let port: Int
    let connections: Int
    let duration: Duration
    var interval: Duration? = nil
    /// Called with each answer's connection, request index, status and wall-clock time.
    var onAnswer: (@Sendable (Int, Int, HTTPResponseStatus?, Date) -> Void)? = nil

    struct Result: Sendable {
        var ok = 0
        var failed = 0
        var elapsed: Duration = .zero
        var rate: Double { Double(ok) / max(elapsed.seconds, 0.001) }
    }

    /// `body(connection, index)` makes the form of the `index`-th request on a connection.
    func run(path: String, body: @escaping @Sendable (Int, Int) -> String) async throws -> Result {
        let start = ContinuousClock.now
        let deadline = start + duration
        let results = try await withThrowingTaskGroup(of: Result.self) { group in
            for connection in 0..<connections {
                group.addTask { try await drive(connection: connection, path: path, deadline: deadline, body: body) }
            }
            var total = Result()
            for try await result in group {
                total.ok += result.ok
                total.failed += result.failed
            }
            return total
        }
        var total = results
        total.elapsed = ContinuousClock.now - start
        return total
    }

    private func drive(
        connection: Int,
        path: String,
        deadline: ContinuousClock.Instant,
        body: @escaping @Sendable (Int, Int) -> String
    ) async throws -> Result {
        try await connect().executeThenClose { inbound, outbound in
            var result = Result()
            var responses = inbound.makeAsyncIterator()
            var index = 0
            var next = ContinuousClock.now
            while ContinuousClock.now < deadline {
                if let interval {
                    next += interval
                    try await Task.sleep(until: next)
                }
                let status = try await Self.request(path: path, form: body(connection, index), outbound: outbound, responses: &responses)
                onAnswer?(connection, index, status, Date())
                index += 1
                if status == .ok { result.ok += 1 } else { result.failed += 1 }
            }
            return result
        }
    }

    /// One request on a new connection; its status code.
    func single(
        path: String,
        form: String,
        contentType: String = "application/x-www-form-urlencoded",
        headers: [(String, String)] = []
    ) async throws -> Int {
        try await connect().executeThenClose { inbound, outbound in
            var responses = inbound.makeAsyncIterator()
            let status = try await Self.request(
                path: path,
                form: form,
                contentType: contentType,
                headers: headers,
                outbound: outbound,
                responses: &responses
            )
            return Int(status?.code ?? 0)
        }
    }

    /// `GET path` on a new connection; the body of a 200 answer, nil otherwise.
    func fetch(path: String) async throws -> String? {
        try await connect().executeThenClose { inbound, outbound in
            var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path)
            head.headers.add(name: "Host", value: "localhost")
            try await outbound.write(contentsOf: [.head(head), .end(nil)])
            var status: HTTPResponseStatus?
            var body = ByteBuffer()
            for try await part in inbound {
                switch part {
                case .head(let response): status = response.status
                case .body(var bytes): body.writeBuffer(&bytes)
                case .end: return status == .ok ? String(buffer: body) : nil
                }
            }
            return nil
        }
    }

    private func connect() async throws -> NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart> {
        try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
    }

    private static func request(
        path: String,
        form: String,
        contentType: String = "application/x-www-form-urlencoded",
        headers: [(String, String)] = [],
        outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>,
        responses: inout NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator
    ) async throws -> HTTPResponseStatus? {
        var head = HTTPRequestHead(version: .http1_1, method: form.isEmpty ? .GET : .POST, uri: path)
        head.headers.add(name: "Host", value: "localhost")
        head.headers.add(name: "Content-Type", value: contentType)
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        head.headers.add(name: "Content-Length", value: "\(form.utf8.count)")
        try await outbound.write(contentsOf: [.head(head), .body(.byteBuffer(ByteBuffer(string: form))), .end(nil)])
        var status: HTTPResponseStatus?
        while let part = try await responses.next() {
            if case .head(let response) = part { status = response.status }
            if case .end = part { break }
        }
        return status
    }
}
