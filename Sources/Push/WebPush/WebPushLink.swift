import APNs
import Foundation
import HTTP2Client
import NIOConcurrencyHelpers
import NIOCore
import Support
import WebPush

/// One link over every push service a sender's rows name: an HTTP/2 connection per origin, opened when a request for
/// it first comes (at the addresses the host's check allowed, never resolved again in between), and the events of all
/// of them as one stream. A push service that cannot be reached, or that turns out to point inside the network, holds
/// back only its own rows (answered as retry later, or failed), never another origin's; one that goes away or drops
/// is connected to again by the next request for it.
final class WebPushLink: DestinationLink, Sendable {
    typealias Request = WebPushWire

    let connector: HTTP2Connector
    let privateHosts: Set<String>
    let drainTimeout: Duration
    let verdict: @Sendable (HTTP2Answer) -> Verdict
    private let events: AsyncStream<LinkEvent>
    private let continuation: AsyncStream<LinkEvent>.Continuation
    private let state = NIOLockedValueBox(State())

    /// What the connections are doing.
    private struct State {
        var origins: [String: Origin] = [:]
        /// Connections open or opening, and their readers: the link's last event waits for all of them.
        var parts = 0
        var closing = false
        var closedReported = false
        var nextID = 0
    }

    private enum Origin {
        /// Being opened: what was sent for it meanwhile.
        case opening([WebPushWire])
        case open(Connection)
    }

    private struct Connection: Sendable {
        let id: Int
        let channel: any Channel
        let handler: NIOLoopBound<HTTP2ClientHandler>
        var maxStreams: Int?
    }

    /// A push service's usual SETTINGS_MAX_CONCURRENT_STREAMS until one says otherwise (RFC 9113 recommends at least 100).
    var initialWindow: Int { 100 }

    init(
        connector: HTTP2Connector,
        privateHosts: Set<String>,
        drainTimeout: Duration,
        verdict: @escaping @Sendable (HTTP2Answer) -> Verdict
    ) {
        self.connector = connector
        self.privateHosts = privateHosts
        self.drainTimeout = drainTimeout
        self.verdict = verdict
        (events, continuation) = AsyncStream.makeStream(of: LinkEvent.self)
    }

    func run(_ report: @escaping @Sendable (LinkEvent) -> Void) async {
        for await event in events { report(event) }
    }

    func send(_ requests: [WebPushWire]) async -> Bool {
        var byOrigin: [String: [WebPushWire]] = [:]
        for request in requests { byOrigin[request.subscription.origin, default: []].append(request) }
        for (origin, batch) in byOrigin {
            enum Step {
                case write(Connection)
                case open
                case queued
                case refused
            }
            let step: Step = state.withLockedValue { state in
                guard !state.closing else { return .refused }
                switch state.origins[origin] {
                case .open(let connection): return .write(connection)
                case .opening(let waiting):
                    state.origins[origin] = .opening(waiting + batch)
                    return .queued
                case nil:
                    state.origins[origin] = .opening(batch)
                    state.parts += 1
                    return .open
                }
            }
            switch step {
            case .refused:
                return false
            case .queued:
                continue
            case .open:
                let subscription = batch[0].subscription
                Task { await self.open(origin, subscription) }
            case .write(let connection):
                if await !Self.write(batch, on: connection) {
                    // It ended since: the next connection to the origin takes them.
                    retire(origin, connection.id)
                    continuation.yield(.unanswered(batch.map(\.request.notification), reason: "the push service's connection ended"))
                }
            }
        }
        return true
    }

    private static func write(_ batch: [WebPushWire], on connection: Connection) async -> Bool {
        let handler = connection.handler
        let requests = batch.map(\.request)
        return (try? await handler.eventLoop.submit { handler.value.send(requests) }.get()) == true
    }

    /// Opens the origin's connection: its host's addresses checked (DNS may have changed since the registration),
    /// then connected to; what waited for it is written, or answered as the failure says.
    private func open(_ origin: String, _ subscription: WebPushSubscription) async {
        let opened: (any Channel, NIOLoopBound<HTTP2ClientHandler>, AsyncStream<HTTP2Event>)
        do {
            let addresses = try await subscription.checkedAddresses(privateHosts: privateHosts)
            let host = subscription.host
            let serverName = ClientAddress(host) == nil ? host : nil
            opened = try await connector.connect(to: addresses, serverName: serverName)
        } catch let error as WebPushError where error.code == .insideNetwork {
            fail(origin, .failed(Verdict.Failure(status: "invalid", reason: error.reason, kind: "inside_network")))
            return
        } catch {
            let reason = (error as? WebPushError)?.reason ?? "\(origin) could not be reached: \(error)"
            fail(origin, .retryLater(after: .seconds(1), status: "connect", reason: reason, growing: true))
            return
        }
        let (channel, handler, events) = opened
        let (waiting, connection): ([WebPushWire], Connection?) = state.withLockedValue { state in
            guard case .opening(let waiting) = state.origins[origin] else { return ([], nil) }
            guard !state.closing else {
                state.origins[origin] = nil
                return (waiting, nil)
            }
            state.nextID += 1
            let connection = Connection(id: state.nextID, channel: channel, handler: handler)
            state.origins[origin] = .open(connection)
            return (waiting, connection)
        }
        guard let connection else {
            // Closing meanwhile: nothing was written on it.
            continuation.yield(.unanswered(waiting.map(\.request.notification), reason: "the link closed"))
            try? await handler.eventLoop.submit { handler.value.close() }.get()
            try? await channel.closeFuture.get()
            finishPart()
            return
        }
        if !waiting.isEmpty, await !Self.write(waiting, on: connection) {
            continuation.yield(.unanswered(waiting.map(\.request.notification), reason: "the push service's connection ended"))
        }
        await read(events, of: connection, origin: origin)
    }

    /// The rows that waited for an origin that could not be opened, each answered with `verdict`.
    private func fail(_ origin: String, _ verdict: Verdict) {
        let waiting: [WebPushWire] = state.withLockedValue { state in
            guard case .opening(let waiting) = state.origins[origin] else { return [] }
            state.origins[origin] = nil
            return waiting
        }
        if !waiting.isEmpty { continuation.yield(.answered(waiting.map { Answer($0.request.notification, verdict) })) }
        finishPart()
    }

    /// Reports a connection's events as the link's. Its going away or ending is its origin's alone: the next request
    /// for the origin opens another. Rows a connection that never answered left behind when it dropped (a handshake
    /// refused, a peer that resets) are answered as retry later, so they do not come straight back to it.
    private func read(_ events: AsyncStream<HTTP2Event>, of connection: Connection, origin: String) async {
        var answeredAny = false
        var held: [QueuedNotification] = []
        for await event in events {
            switch event {
            case .answered(let answers):
                answeredAny = true
                if !held.isEmpty {
                    continuation.yield(.unanswered(held, reason: "over the push service's concurrent streams"))
                    held = []
                }
                continuation.yield(.answered(answers.map { Answer($0.request.notification, verdict($0)) }))
            case .unanswered(let requests, let reason):
                if answeredAny {
                    continuation.yield(.unanswered(requests.map(\.notification), reason: reason))
                } else {
                    held += requests.map(\.notification)
                }
            case .timedOut(let requests, let timeout):
                continuation.yield(.timedOut(requests.map(\.notification), after: timeout))
            case .maxStreams(let value):
                let window: Int = state.withLockedValue { state in
                    if case .open(var open) = state.origins[origin], open.id == connection.id {
                        open.maxStreams = value
                        state.origins[origin] = .open(open)
                    }
                    return state.origins.values.compactMap { origin -> Int? in
                        if case .open(let open) = origin { return open.maxStreams }
                        return nil
                    }.min() ?? value
                }
                continuation.yield(.window(window))
            case .goingAway:
                retire(origin, connection.id)
            case .closed(let reason, let ending):
                retire(origin, connection.id)
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
        finishPart()
    }

    /// The origin's connection `id` takes no new requests: the next one for the origin opens another.
    private func retire(_ origin: String, _ id: Int) {
        state.withLockedValue { state in
            if case .open(let open) = state.origins[origin], open.id == id { state.origins[origin] = nil }
        }
    }

    /// A connection (or an attempt at one) is over; once closing and the last is over, the link's last event.
    private func finishPart() {
        let last: Bool = state.withLockedValue { state in
            state.parts -= 1
            guard state.closing, state.parts == 0, !state.closedReported else { return false }
            state.closedReported = true
            return true
        }
        if last { finish() }
    }

    private func finish() {
        continuation.yield(.closed("closed", .orderly))
        continuation.finish()
    }

    /// GOAWAY(NO_ERROR) on every connection; the link's last event once each has ended and been read.
    func close() async {
        let (open, done): ([Connection], Bool) = state.withLockedValue { state in
            state.closing = true
            let open = state.origins.values.compactMap { origin -> Connection? in
                if case .open(let connection) = origin { return connection }
                return nil
            }
            let done = state.parts == 0 && !state.closedReported
            if done { state.closedReported = true }
            return (open, done)
        }
        if done { finish() }
        for connection in open {
            let handler = connection.handler
            try? await handler.eventLoop.submit { handler.value.close() }.get()
        }
        for connection in open { try? await connection.channel.closeFuture.get() }
    }
}
