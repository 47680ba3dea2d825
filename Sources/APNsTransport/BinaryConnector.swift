import HTTP2Client
import NIOConcurrencyHelpers
package import NIOCore
import NIOPosix
package import NIOSSL
import NIOTLS
package import Settings
import Support

/// Opens TLS connections to the binary gateway with the provider's client certificate.
package struct BinaryConnector: Sendable {
    package let endpoint: Endpoint
    let tls: NIOSSLContext
    let group: any EventLoopGroup
    let timeout: Duration

    package init(
        endpoint: Endpoint,
        tls: NIOSSLContext,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        timeout: Duration = .seconds(10)
    ) {
        self.endpoint = endpoint
        self.tls = tls
        self.group = group
        self.timeout = timeout
    }

    /// Connects and completes the TLS handshake; a refused certificate throws ``GatewayError``.
    /// The alarm is raised, on the event loop, the moment the gateway sends anything or closes.
    package func connect() async throws -> (NIOAsyncChannel<ByteBuffer, ByteBuffer>, GatewayAlarm) {
        let alarm = GatewayAlarm()
        let isAddress = (try? SocketAddress(ipAddress: endpoint.host, port: endpoint.port)) != nil
        let serverHostname = isAddress ? nil : endpoint.host
        let tls = self.tls
        let connected: (NIOAsyncChannel<ByteBuffer, ByteBuffer>, EventLoopFuture<Void>)
        do {
            connected = try await ClientBootstrap(group: ConnectionThreads.group ?? group)
                .connectTimeout(TimeAmount(timeout))
                .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
                .connect(host: endpoint.host, port: endpoint.port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let handshake = channel.eventLoop.makePromise(of: Void.self)
                        try channel.pipeline.syncOperations.addHandler(
                            try NIOSSLClientHandler(context: tls, serverHostname: serverHostname)
                        )
                        try channel.pipeline.syncOperations.addHandler(HandshakeHandler(promise: handshake))
                        try channel.pipeline.syncOperations.addHandler(AlarmHandler(alarm: alarm))
                        let asyncChannel = try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                        return (asyncChannel, handshake.futureResult)
                    }
                }
        } catch {
            throw GatewayError(endpoint: endpoint, reason: GatewayError.describe(error))
        }
        let (channel, handshake) = connected
        do {
            try await withDeadline(timeout) { try await handshake.get() }
        } catch {
            try? await channel.channel.close()
            throw GatewayError(endpoint: endpoint, reason: GatewayError.describe(error))
        }
        return (channel, alarm)
    }
}
