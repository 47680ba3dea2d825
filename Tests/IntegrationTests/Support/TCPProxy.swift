import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A loopback TCP forwarder in front of a server (PostgreSQL), so a test can make the server go away for a process
/// and come back: ``stop()`` closes the listener and every forwarded connection (new connections are refused, as
/// with a stopped server), ``start()`` listens again on the same port.
final class TCPProxy: Sendable {
    let upstreamPort: Int
    private let state = NIOLockedValueBox<(listener: (any Channel)?, connections: [any Channel], port: Int)>((nil, [], 0))

    init(upstreamPort: Int) {
        self.upstreamPort = upstreamPort
    }

    var port: Int { state.withLockedValue { $0.port } }

    func start() async throws {
        let upstreamPort = self.upstreamPort
        let requested = port
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [state] client in
                ClientBootstrap(group: client.eventLoop)
                    .connect(host: "127.0.0.1", port: upstreamPort)
                    .flatMapThrowing { server in
                        try client.pipeline.syncOperations.addHandler(Forwarder(partner: server))
                        try server.pipeline.syncOperations.addHandler(Forwarder(partner: client))
                        state.withLockedValue { $0.connections += [client, server] }
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
