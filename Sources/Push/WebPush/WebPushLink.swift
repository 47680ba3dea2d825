import APNs
import Foundation
import HTTP2Client
import Logging
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import Support
import WebPush

/// One link over every push service a sender's rows name: an HTTP/2 connection per origin, opened when a request for
/// it first comes (at the addresses the host's check allowed, never resolved again in between), and the events of all
/// of them as one stream. A push service whose TLS chooses HTTP/1.1 over ALPN gets its requests again over HTTP/1.1
/// (``PushServiceHTTP1``: a few kept-alive connections), and every later connection to it is an HTTP/1.1 one. A push service that cannot be reached, or that turns out to point inside the network, holds
/// back only its own rows (answered as retry later, or failed), never another origin's; one that goes away or drops
/// is connected to again by the next request for it.
final class WebPushLink: DestinationLink, Sendable {
    typealias Request = WebPushWire

    let connector: HTTP2Connector
    let privateHosts: Set<String>
    let drainTimeout: Duration
    let verdict: @Sendable (HTTP2Answer) -> Verdict
    let logger: Logger
    /// Push services' connections open (`pushchat_webpush_connections{app}`).
    let connections: Meter
    private let events: AsyncStream<LinkEvent>
    private let continuation: AsyncStream<LinkEvent>.Continuation
    private let state: NIOLockedValueBox<PushServiceConnections<Connection, WebPushWire>>

    /// How a push service that speaks only HTTP/1.1 is reached: TLS (the system's roots and `webpush_ca_file`'s),
    /// the request timeout, the event loops.
    struct HTTP1: Sendable {
        /// The origins known to speak only HTTP/1.1 (the transport's, shared by its links).
        let origins: HTTP1Origins
        let tls: TLSConfiguration
        let requestTimeout: Duration
        let group: any EventLoopGroup
    }
    let http1: HTTP1

    /// A push service's connection: HTTP/2, or HTTP/1.1 (a few of them).
    enum Connection: Sendable {
        case http2(any Channel, NIOLoopBound<HTTP2ClientHandler>)
        case http1(PushServiceHTTP1)

        /// GOAWAY(NO_ERROR) and close; HTTP/1.1: no new request, closed once those under way are answered.
        func close() async {
            switch self {
            case .http2(_, let handler):
                try? await handler.eventLoop.submit { handler.value.close() }.get()
            case .http1(let client):
                client.close()
            }
        }

        /// Once it is closed (HTTP/1.1: its reader reports it).
        func closed() async {
            if case .http2(let channel, _) = self { try? await channel.closeFuture.get() }
        }
    }

    /// A push service's usual SETTINGS_MAX_CONCURRENT_STREAMS until one says otherwise (RFC 9113 recommends at least 100).
    var initialWindow: Int { 100 }

    /// `limit` connections at most kept open with nothing in flight (`webpush_max_connections`), each closed after
    /// `idle` without work (`apns_connection_idle`).
    init(
        connector: HTTP2Connector,
        privateHosts: Set<String>,
        drainTimeout: Duration,
        http1: HTTP1,
        limit: Int,
        idle: Duration,
        connections: Meter,
        logger: Logger,
        verdict: @escaping @Sendable (HTTP2Answer) -> Verdict
    ) {
        self.connections = connections
        self.http1 = http1
        self.connector = connector
        self.privateHosts = privateHosts
        self.drainTimeout = drainTimeout
        self.verdict = verdict
        self.logger = logger
        state = NIOLockedValueBox(PushServiceConnections(limit: limit, idle: idle))
        (events, continuation) = AsyncStream.makeStream(of: LinkEvent.self)
    }

    /// The events, and meanwhile the idle connections closed as they become idle.
    func run(_ report: @escaping @Sendable (LinkEvent) -> Void) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.closeIdle() }
            for await event in events { report(event) }
            group.cancelAll()
        }
    }

    /// Looks for idle connections a few times per `idle` (every 250 ms to 5 s) until the link's events end.
    private func closeIdle() async {
        let idle = state.withLockedValue { $0.idle }
        let every = min(max(idle / 4, .milliseconds(250)), .seconds(5))
        while (try? await Task.sleep(for: every)) != nil {
            let closing = state.withLockedValue { $0.idleConnections(now: .now) }
            if !closing.isEmpty {
                logger.debug("Web Push: \(closing.count) push service connection(s) idle for \(idle.formatted): closed")
            }
            for connection in closing { await connection.close() }
        }
    }

    func send(_ requests: [WebPushWire]) async -> Bool {
        var byOrigin: [String: [WebPushWire]] = [:]
        for request in requests { byOrigin[request.subscription.origin, default: []].append(request) }
        for (origin, batch) in byOrigin {
            let step = state.withLockedValue { $0.send(origin, batch, count: batch.count, now: .now) }
            switch step {
            case .refused:
                return false
            case .queued:
                continue
            case .open(let closing):
                if !closing.isEmpty {
                    logger.debug("Web Push: \(closing.count) idle push service connection(s) closed to make room for \(origin)")
                }
                for connection in closing { await connection.close() }
                let subscription = batch[0].subscription
                Task { await self.open(origin, subscription) }
            case .write(let id, let connection):
                if await !Self.write(batch, on: connection) {
                    // It ended since: the next connection to the origin takes them.
                    state.withLockedValue { $0.retire(origin, id: id) }
                    continuation.yield(.unanswered(batch.map(\.request.notification), reason: "the push service's connection ended"))
                }
            }
        }
        return true
    }

    private static func write(_ batch: [WebPushWire], on connection: Connection) async -> Bool {
        switch connection {
        case .http2(_, let handler):
            let requests = batch.map(\.request)
            return (try? await handler.eventLoop.submit { handler.value.send(requests) }.get()) == true
        case .http1(let client):
            return client.send(batch)
        }
    }

    /// Opens the origin's connection: its host's addresses checked (DNS may have changed since the registration),
    /// then connected to (HTTP/2, or HTTP/1.1 once the push service chose it); what waited for it is written, or
    /// answered as the failure says.
    private func open(_ origin: String, _ subscription: WebPushSubscription) async {
        let connection: Connection
        let events: AsyncStream<HTTP2Event>?
        do {
            let addresses = try await subscription.checkedAddresses(privateHosts: privateHosts)
            let host = subscription.host
            let literal = ClientAddress(host) != nil
            if http1.origins.contains(origin) {
                let client = PushServiceHTTP1(
                    origin: origin,
                    host: host,
                    address: literal ? nil : addresses.first?.ipAddress,
                    tls: http1.tls,
                    requestTimeout: http1.requestTimeout,
                    idle: state.withLockedValue { $0.idle },
                    group: http1.group
                )
                (connection, events) = (.http1(client), nil)
            } else {
                let (channel, handler, stream) = try await connector.connect(to: addresses, serverName: literal ? nil : host)
                (connection, events) = (.http2(channel, handler), stream)
            }
        } catch let error as WebPushError where error.code == .insideNetwork {
            fail(origin, .failed(Verdict.Failure(status: "invalid", reason: error.reason, kind: "inside_network")))
            return
        } catch {
            let reason = (error as? WebPushError)?.reason ?? "\(origin) could not be reached: \(error)"
            fail(origin, .retryLater(after: .seconds(1), status: "connect", reason: reason, growing: true))
            return
        }
        let step = state.withLockedValue { $0.opened(origin, connection, now: .now, count: \.count) }
        switch step {
        case .close(let waiting):
            // Closing meanwhile: nothing was written on it.
            if !waiting.isEmpty { continuation.yield(.unanswered(waiting.map(\.request.notification), reason: "the link closed")) }
            await connection.close()
            if case .http1(let client) = connection { await client.run { _ in } }
            await connection.closed()
            partFinished()
        case .use(let id, let waiting):
            if !waiting.isEmpty, await !Self.write(waiting, on: connection) {
                state.withLockedValue { $0.retire(origin, id: id) }
                continuation.yield(.unanswered(waiting.map(\.request.notification), reason: "the push service's connection ended"))
            }
            connections.increment()
            defer { connections.decrement() }
            switch connection {
            case .http2:
                logger.info("Connection OK (Web Push)", metadata: ["push.origin": "\(origin)"])
                if let events { await read(events, of: id, origin: origin) }
            case .http1(let client):
                logger.info("Connection OK (Web Push over HTTP/1.1)", metadata: ["push.origin": "\(origin)"])
                await read(client, of: id, origin: origin)
            }
        }
    }

    /// Reports an HTTP/1.1 push service's outcomes as the link's events, until it is closed and its last request
    /// is answered.
    private func read(_ client: PushServiceHTTP1, of id: Int, origin: String) async {
        await client.run { [continuation, state, verdict] outcome in
            state.withLockedValue { $0.settled(origin, id: id, count: 1, now: .now) }
            switch outcome {
            case .answered(let answer):
                continuation.yield(.answered([Answer(answer.request.notification, verdict(answer))]))
            case .timedOut(let notification, let timeout):
                continuation.yield(.timedOut([notification], after: timeout))
            case .unreachable(let notification, let reason):
                let later = Verdict.retryLater(after: .seconds(1), status: "connect", reason: reason, growing: true)
                continuation.yield(.answered([Answer(notification, later)]))
            }
        }
        state.withLockedValue { $0.retire(origin, id: id) }
        partFinished()
    }

    /// The rows that waited for an origin that could not be opened, each answered with `verdict`.
    private func fail(_ origin: String, _ verdict: Verdict) {
        let waiting = state.withLockedValue { $0.failed(origin) }
        if !waiting.isEmpty { continuation.yield(.answered(waiting.map { Answer($0.request.notification, verdict) })) }
        partFinished()
    }

    /// Reports a connection's events as the link's. Its going away or ending is its origin's alone: the next request
    /// for the origin opens another. Rows a connection that never answered left behind when it dropped (a handshake
    /// refused, a peer that resets) are answered as retry later, so they do not come straight back to it.
    private func read(_ events: AsyncStream<HTTP2Event>, of id: Int, origin: String) async {
        var answeredAny = false
        var held: [QueuedNotification] = []
        func settled(_ count: Int) { state.withLockedValue { $0.settled(origin, id: id, count: count, now: .now) } }
        for await event in events {
            switch event {
            case .answered(let answers):
                settled(answers.count)
                answeredAny = true
                if !held.isEmpty {
                    continuation.yield(.unanswered(held, reason: "over the push service's concurrent streams"))
                    held = []
                }
                continuation.yield(.answered(answers.map { Answer($0.request.notification, verdict($0)) }))
            case .unanswered(let requests, let reason):
                settled(requests.count)
                if answeredAny {
                    continuation.yield(.unanswered(requests.map(\.notification), reason: reason))
                } else {
                    held += requests.map(\.notification)
                }
            case .timedOut(let requests, let timeout):
                settled(requests.count)
                continuation.yield(.timedOut(requests.map(\.notification), after: timeout))
            case .maxStreams(let value):
                let window = state.withLockedValue { $0.maxStreams(origin, id: id, value) }
                continuation.yield(.window(window))
            case .goingAway:
                state.withLockedValue { $0.retire(origin, id: id) }
            case .closed(_, .notHTTP2):
                // Its TLS chose HTTP/1.1: nothing was sent; what waited goes again, over HTTP/1.1 from now on.
                state.withLockedValue { $0.retire(origin, id: id) }
                http1.origins.insert(origin)
                logger.info("Web Push: \(origin) does not speak HTTP/2; its messages go over HTTP/1.1")
                if !held.isEmpty {
                    continuation.yield(.unanswered(held, reason: "\(origin) speaks HTTP/1.1: sent again over it"))
                    held = []
                }
            case .closed(let reason, let ending):
                state.withLockedValue { $0.retire(origin, id: id) }
                if !held.isEmpty {
                    if ending == .orderly {
                        continuation.yield(.unanswered(held, reason: reason))
                    } else {
                        let later = Verdict.retryLater(after: .seconds(1), status: "connect", reason: "\(origin): \(reason)", growing: true)
                        continuation.yield(.answered(held.map { Answer($0, later) }))
                    }
                    held = []
                }
            }
        }
        if !held.isEmpty { continuation.yield(.unanswered(held, reason: "the push service's connection ended")) }
        partFinished()
    }

    /// A connection (or an attempt at one) is over; once closing and the last is over, the link's last event.
    private func partFinished() {
        if state.withLockedValue({ $0.partFinished() }) { finish() }
    }

    private func finish() {
        continuation.yield(.closed("closed", .orderly))
        continuation.finish()
    }

    /// GOAWAY(NO_ERROR) on every connection; the link's last event once each has ended and been read.
    func close() async {
        let (open, done) = state.withLockedValue { $0.close() }
        if done { finish() }
        for connection in open { await connection.close() }
        for connection in open { await connection.closed() }
    }
}
