import APNs
import AsyncHTTPClient
import Foundation
import HTTP2Client
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOSSL
import Support

/// A push service that does not speak HTTP/2 (its TLS chose HTTP/1.1 over ALPN): its requests go over HTTP/1.1, on
/// up to ``connections`` kept-alive connections of one `HTTPClient` for this origin alone. Every connection goes to the
/// address the host's check allowed (`dnsOverride`: never resolved again), no redirect is followed, and each request is
/// bounded by the request timeout. Answers come back as the HTTP/2 client's do (``HTTP2Answer``), so the destination's
/// verdicts are the same on both.
final class PushServiceHTTP1: Sendable {
    /// Requests under way at once to one push service over HTTP/1.1 (one per connection).
    static let connections = 8

    let origin: String
    let requestTimeout: Duration
    private let client: HTTPClient
    private let requests: AsyncStream<[WebPushWire]>
    private let continuation: AsyncStream<[WebPushWire]>.Continuation

    /// What became of one request.
    enum Outcome: Sendable {
        case answered(HTTP2Answer)
        /// No answer within the request timeout: it may have arrived.
        case timedOut(QueuedNotification, Duration)
        /// The push service could not be reached or dropped the connection before answering.
        case unreachable(QueuedNotification, String)
    }

    /// `address`: where `host` is connected to (nil for an IP literal).
    init(
        origin: String,
        host: String,
        address: String?,
        tls: TLSConfiguration,
        requestTimeout: Duration,
        idle: Duration,
        group: any EventLoopGroup
    ) {
        self.origin = origin
        self.requestTimeout = requestTimeout
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(10), read: .nanoseconds(requestTimeout.nanoseconds)),
            connectionPool: .init(
                idleTimeout: .nanoseconds(idle.nanoseconds),
                concurrentHTTP1ConnectionsPerHostSoftLimit: Self.connections
            ),
            decompression: .disabled
        )
        configuration.httpVersion = .http1Only
        if let address { configuration.dnsOverride = [host: address] }
        client = HTTPClient(eventLoopGroup: group, configuration: configuration)
        (requests, continuation) = AsyncStream.makeStream(of: [WebPushWire].self)
    }

    /// Takes the requests; false once closed (nothing was taken).
    func send(_ batch: [WebPushWire]) -> Bool {
        if case .terminated = continuation.yield(batch) { return false }
        return true
    }

    /// Takes no more requests: ``run(_:)`` ends once those under way are answered (or time out).
    func close() { continuation.finish() }

    /// Sends each request as it comes, at most ``connections`` at once (the client queues the rest), reporting each
    /// outcome; after ``close()``, waits for those under way, then shuts the client down.
    func run(_ report: @escaping @Sendable (Outcome) -> Void) async {
        await withDiscardingTaskGroup { group in
            for await batch in requests {
                for wire in batch {
                    group.addTask { report(await self.execute(wire)) }
                }
            }
        }
        try? await client.shutdown()
    }

    private func execute(_ wire: WebPushWire) async -> Outcome {
        let notification = wire.request.notification
        var request = HTTPClientRequest(url: origin + (wire.request.headers.first(name: ":path") ?? "/"))
        request.method = .POST
        for (name, value, _) in wire.request.headers where !name.hasPrefix(":") { request.headers.add(name: name, value: value) }
        request.headers.replaceOrAdd(name: "content-length", value: "\(wire.request.body.readableBytes)")
        request.body = .bytes(wire.request.body)
        do {
            let response = try await client.execute(request, timeout: .nanoseconds(requestTimeout.nanoseconds))
            // An error's text is kept (4 KiB at most, as over HTTP/2); past that the body is not read at all (the
            // connection is dropped rather than reused), so an endless body costs nothing more.
            var body = ByteBuffer()
            for try await part in response.body {
                var part = part
                body.writeBuffer(&part)
                if body.readableBytes >= 4_096 { break }
            }
            body.moveWriterIndex(to: min(body.writerIndex, body.readerIndex + 4_096))
            return .answered(
                HTTP2Answer(
                    request: wire.request,
                    status: Int(response.status.code),
                    body: Array(body.readableBytesView),
                    retryAfter: response.headers.first(name: "retry-after")
                )
            )
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            return .timedOut(notification, requestTimeout)
        } catch {
            return .unreachable(notification, "\(origin) over HTTP/1.1: \(error)")
        }
    }
}

/// The push services known to speak only HTTP/1.1 (their TLS chose it over ALPN), shared by a sender's links: a link
/// opened for a broadcast does not learn it again with a handshake that sends nothing. At most 10,000 remembered.
final class HTTP1Origins: Sendable {
    private let origins = NIOLockedValueBox(Set<String>())

    init() {}

    func contains(_ origin: String) -> Bool { origins.withLockedValue { $0.contains(origin) } }

    func insert(_ origin: String) {
        origins.withLockedValue { origins in
            if origins.count >= 10_000 { origins = [] }
            origins.insert(origin)
        }
    }
}
