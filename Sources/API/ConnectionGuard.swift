import Logging
import NIOCore
import NIOHTTP1
import Settings
import Support

/// Keeps one API connection within its limits: the per-address connection cap, and the header, body and idle
/// timeouts of ``ConnectionDeadline``. Two handlers share it: ``RawSide`` at the front of the pipeline (it sees the
/// connection open and the first bytes of a request) and ``RequestSide`` before the HTTP-types conversion (it sees
/// request heads and ends, and answers going out). All on the connection's event loop.
final class ConnectionGuard {
    let limits: APILimits
    let counter: ConnectionCounter
    let resolver: ClientAddressResolver
    let logger: Logger
    private var deadline: ConnectionDeadline?
    private var countedKey: String?
    private var counted = false
    private var timer: Scheduled<Void>?
    private var isOpen = false
    private weak var context: ChannelHandlerContext?

    init(limits: APILimits, counter: ConnectionCounter, resolver: ClientAddressResolver, logger: Logger) {
        self.limits = limits
        self.counter = counter
        self.resolver = resolver
        self.logger = logger
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount { .nanoseconds(duration.nanoseconds) }

    /// The connection is up: count it against its address (closing it at once past the cap) and start the clock.
    func opened(_ context: ChannelHandlerContext) {
        guard !isOpen else { return }
        isOpen = true
        self.context = context
        let peer = context.channel.remoteAddress?.ipAddress.flatMap(ClientAddress.init)
        let key = peer.flatMap { resolver.isTrusted($0) ? nil : resolver.limitKey($0) }
        switch counter.open(key) {
        case .address?:
            let (log, more) = counter.refusals.admit(status: 1)
            if log {
                logger.notice(
                    "Refused a connection: \(key ?? "-") already holds \(counter.maximum) (api_max_connections_per_ip)\(more > 0 ? "; \(more) more refused" : "")"
                )
            }
            context.close(promise: nil)
            return
        case .total?:
            let (log, more) = counter.refusals.admit(status: 2)
            if log {
                logger.notice(
                    "Refused a connection: \(counter.maximumTotal) are open (api_max_connections)\(more > 0 ? "; \(more) more refused" : "")"
                )
            }
            context.close(promise: nil)
            return
        case nil:
            countedKey = key
            counted = true
        }
        deadline = ConnectionDeadline(
            header: Self.timeAmount(limits.headerTimeout),
            body: Self.timeAmount(limits.bodyTimeout),
            idle: Self.timeAmount(limits.idleTimeout),
            now: .now()
        )
        schedule()
    }

    func closed() {
        timer?.cancel()
        timer = nil
        deadline = nil
        if counted { counter.close(countedKey) }
        counted = false
        countedKey = nil
    }

    func update(_ change: (inout ConnectionDeadline) -> Void) {
        guard var current = deadline else { return }
        change(&current)
        deadline = current
        schedule()
    }

    /// One timer per connection, at its current deadline; when it fires early (the deadline moved), it re-arms.
    private func schedule() {
        timer?.cancel()
        timer = nil
        guard let context, let due = deadline?.deadline else { return }
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: due) { loopBound.value.check() }
    }

    private func check() {
        guard let context, let current = deadline else { return }
        guard current.hasExpired(now: .now()) else {
            schedule()
            return
        }
        let what =
            switch current.phase {
            case .awaitingHead(started: true): "the request head took longer than \(limits.headerTimeout.formatted)"
            case .awaitingHead(started: false): "idle longer than \(limits.idleTimeout.formatted)"
            case .readingBody: "the request body took longer than \(limits.bodyTimeout.formatted)"
            case .answering: "answering"
            }
        logger.debug("Closing a connection: \(what)")
        deadline = nil
        context.close(promise: nil)
    }

    /// At the front of the pipeline: the connection's start and end, and bytes arriving.
    final class RawSide: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        let guardian: ConnectionGuard

        init(_ guardian: ConnectionGuard) { self.guardian = guardian }

        func handlerAdded(context: ChannelHandlerContext) {
            if context.channel.isActive { guardian.opened(context) }
        }

        func channelActive(context: ChannelHandlerContext) {
            guardian.opened(context)
            context.fireChannelActive()
        }

        func channelInactive(context: ChannelHandlerContext) {
            guardian.closed()
            context.fireChannelInactive()
        }

        func handlerRemoved(context: ChannelHandlerContext) { guardian.closed() }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guardian.update { $0.bytesArrived(now: .now()) }
            context.fireChannelRead(data)
        }
    }

    /// Before the HTTP-types conversion: request heads and ends in, answers out.
    final class RequestSide: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias InboundOut = HTTPServerRequestPart
        typealias OutboundIn = HTTPServerResponsePart
        typealias OutboundOut = HTTPServerResponsePart
        let guardian: ConnectionGuard

        init(_ guardian: ConnectionGuard) { self.guardian = guardian }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head: guardian.update { $0.headReceived(now: .now()) }
            case .end: guardian.update { $0.requestEnded(now: .now()) }
            case .body: break
            }
            context.fireChannelRead(data)
        }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            if case .end = unwrapOutboundIn(data) { guardian.update { $0.answered(now: .now()) } }
            context.write(data, promise: promise)
        }
    }
}
