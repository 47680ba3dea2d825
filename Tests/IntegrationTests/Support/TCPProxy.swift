import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A loopback TCP forwarder in front of a server (PostgreSQL), so a test can make the server go away for a process
/// and come back: ``stop()`` closes the listener and every forwarded connection (new connections are refused, as
/// with a stopped server), ``start()`` listens again on the same port.
final class TCPProxy: Sendable {
    let upstreamPort: Int
    /// `stops` counts the calls to ``stop()``: a connection accepted before one and forwarded after it (its connection
    /// upstream still under way while the proxy stopped) is closed instead of kept, or it would outlive the stop.
    private let state = NIOLockedValueBox<
        (listener: (any Channel)?, connections: [any Channel], port: Int, running: Bool, stops: Int)
    >((nil, [], 0, false, 0))

    init(upstreamPort: Int) {
        self.upstreamPort = upstreamPort
    }

    var port: Int { state.withLockedValue { $0.port } }

    /// Connections forwarded since the last ``stop()``, and those of them still open (a push service's connections
    /// as its side sees them).
    var connections: (forwarded: Int, open: Int) {
        state.withLockedValue { state in
            (state.connections.count / 2, stride(from: 0, to: state.connections.count, by: 2).count { state.connections[$0].isActive })
        }
    }

    func start() async throws {
        let upstreamPort = self.upstreamPort
        let requested = state.withLockedValue { state in
            state.running = true
            return state.port
        }
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [state] client in
                let stops = state.withLockedValue { $0.stops }
                return ClientBootstrap(group: client.eventLoop)
                    .connect(host: "127.0.0.1", port: upstreamPort)
                    .flatMapThrowing { server in
                        let kept = state.withLockedValue { state in
                            guard state.running, state.stops == stops else { return false }
                            state.connections += [client, server]
                            return true
                        }
                        guard kept else {
                            server.close(promise: nil)
                            client.close(promise: nil)
                            throw ChannelError.ioOnClosedChannel
                        }
                        try client.pipeline.syncOperations.addHandler(Forwarder(partner: server))
                        try server.pipeline.syncOperations.addHandler(Forwarder(partner: client))
                    }
            }
            .bind(host: "127.0.0.1", port: requested)
            .get()
        state.withLockedValue {
            $0.listener = listener
            $0.port = listener.localAddress?.port ?? 0
        }
    }

    func stop() async {
        let (listener, connections) = state.withLockedValue { state in
            defer {
                state.listener = nil
                state.connections = []
                state.running = false
                state.stops += 1
            }
            return (state.listener, state.connections)
        }
        try? await listener?.close()
        for connection in connections { try? await connection.close() }
    }

    private final class Forwarder: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let partner: any Channel

        init(partner: any Channel) { self.partner = partner }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            partner.writeAndFlush(unwrapInboundIn(data), promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            partner.close(promise: nil)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
