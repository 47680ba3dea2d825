import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Support

/// Apple's distance on loopback: a TCP forwarder in front of one of the simulator's ports that holds every byte
/// `oneWay` in each direction before passing it on (RTT = 2 × `oneWay`), in order. The benchmark puts it between the
/// push daemon and the simulator (`--rtt-ms`); the bytes are untouched, TLS and HTTP/2 pass through.
package final class LatencyProxy: Sendable {
    package let upstreamPort: Int
    package let oneWay: Duration
    private let state = NIOLockedValueBox<(listener: (any Channel)?, connections: [any Channel])>((nil, []))

    package init(upstreamPort: Int, oneWay: Duration) {
        self.upstreamPort = upstreamPort
        self.oneWay = oneWay
    }

    /// Listens on a free loopback port; returns it.
    package func start() async throws -> Int {
        let (upstreamPort, delay) = (self.upstreamPort, TimeAmount.nanoseconds(oneWay.nanoseconds))
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [state] client in
                ClientBootstrap(group: client.eventLoop)
                    .channelOption(.tcpOption(.tcp_nodelay), value: 1)
                    .connect(host: "127.0.0.1", port: upstreamPort)
                    .flatMapThrowing { server in
                        try client.pipeline.syncOperations.addHandler(DelayedForwarder(partner: server, delay: delay))
                        try server.pipeline.syncOperations.addHandler(DelayedForwarder(partner: client, delay: delay))
                        state.withLockedValue { $0.connections += [client, server] }
                    }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        state.withLockedValue { $0.listener = listener }
        return listener.localAddress?.port ?? 0
    }

    package func stop() async {
        let (listener, connections) = state.withLockedValue { state in
            defer { state = (nil, []) }
            return (state.listener, state.connections)
        }
        try? await listener?.close()
        for connection in connections { try? await connection.close() }
    }
}

/// Passes what one side reads to the other `delay` later, in order: one timer for the oldest pending chunk at a time.
/// Both channels run on one event loop.
final class DelayedForwarder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    let partner: any Channel
    let delay: TimeAmount
    private var pending = CircularBuffer<(due: NIODeadline, data: ByteBuffer?)>()
    private var timer: Scheduled<Void>?

    init(partner: any Channel, delay: TimeAmount) {
        self.partner = partner
        self.delay = delay
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        enqueue(unwrapInboundIn(data), context: context)
    }

    /// The peer closed: the partner is closed once what came before has been passed on.
    func channelInactive(context: ChannelHandlerContext) {
        enqueue(nil, context: context)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func enqueue(_ data: ByteBuffer?, context: ChannelHandlerContext) {
        pending.append((.now() + delay, data))
        if timer == nil { schedule(context.eventLoop) }
    }

    private func schedule(_ loop: any EventLoop) {
        guard let first = pending.first else { return }
        timer = loop.assumeIsolated().scheduleTask(deadline: first.due) { [self] in
            timer = nil
            let now = NIODeadline.now()
            while let head = pending.first, head.due <= now {
                pending.removeFirst()
                guard let data = head.data else {
                    partner.flush()
                    partner.close(promise: nil)
                    pending.removeAll()
                    return
                }
                partner.write(data, promise: nil)
            }
            partner.flush()
            schedule(loop)
        }
    }
}
