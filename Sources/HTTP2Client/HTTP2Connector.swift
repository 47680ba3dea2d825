import Foundation
import Logging
package import NIOCore
import NIOPosix
package import NIOSSL
package import Settings
import Support

/// The event loops the connections a task opens run on, when it names some (a broadcast's lane: threads of their own
/// at a lower priority, `push_broadcast_nice`); else the connector's group chooses. The binary connector honours it too.
package enum ConnectionThreads {
    @TaskLocal package static var group: (any EventLoopGroup)?
}

/// Opens HTTP/2 connections (TLS with ALPN h2) to one server: APNs, FCM, or the simulator.
package struct HTTP2Connector: Sendable {
    package let endpoint: Endpoint
    let tls: NIOSSLContext
    let group: any EventLoopGroup
    let requestTimeout: Duration

    package init(endpoint: Endpoint, tls: NIOSSLContext, group: any EventLoopGroup, requestTimeout: Duration) {
        self.endpoint = endpoint
        self.tls = tls
        self.group = group
        self.requestTimeout = requestTimeout
    }

    package var authority: String { endpoint.port == 443 ? endpoint.host : "\(endpoint.host):\(endpoint.port)" }

    package func connect() async throws -> (any Channel, NIOLoopBound<HTTP2ClientHandler>, AsyncStream<HTTP2Event>) {
        let host = endpoint.host
        let serverName = host.first?.isNumber == true || host.contains(":") ? nil : host
        return try await connect(serverName: serverName) { bootstrap in
            try await bootstrap.connect(host: endpoint.host, port: endpoint.port).get()
        }
    }

    /// Connects to the first of `addresses` that answers, with TLS for `serverName` (nil for an IP literal): a host
    /// whose addresses were checked before (a push service a browser named) is connected to at exactly those, never
    /// resolved again between the check and the connection.
    package func connect(
        to addresses: [SocketAddress],
        serverName: String?
    ) async throws -> (any Channel, NIOLoopBound<HTTP2ClientHandler>, AsyncStream<HTTP2Event>) {
        try await connect(serverName: serverName) { bootstrap in
            var last: (any Error)?
            for address in addresses {
                do {
                    return try await bootstrap.connect(to: address).get()
                } catch {
                    last = error
                }
            }
            throw last ?? ChannelError.connectPending
        }
    }

    private func connect(
        serverName: String?,
        _ open: (ClientBootstrap) async throws -> any Channel
    ) async throws -> (any Channel, NIOLoopBound<HTTP2ClientHandler>, AsyncStream<HTTP2Event>) {
        let (events, continuation) = AsyncStream.makeStream(of: HTTP2Event.self)
        let timeout = TimeAmount.nanoseconds(requestTimeout.nanoseconds)
        let bootstrap = ClientBootstrap(group: ConnectionThreads.group ?? group)
            .connectTimeout(.seconds(10))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            // Reading pauses only when this much waits to be written (see the BackPressureHandler below): a window of
            // requests written in one buffer must not pause the reading of their answers.
            .channelOption(.writeBufferWaterMark, value: .init(low: 1 << 20, high: 4 << 20))
            .channelInitializer { [tls] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: serverName))
                    // No reading while our own writes cannot leave (a server that floods frames needing replies, and
                    // reads nothing, would otherwise grow the outbound buffer without limit).
                    try channel.pipeline.syncOperations.addHandler(BackPressureHandler())
                    try channel.pipeline.syncOperations.addHandler(
                        HTTP2ClientHandler(events: continuation, requestTimeout: timeout, requiresALPN: true)
                    )
                }
            }
        let channel = try await open(bootstrap)
        let handler = try await channel.eventLoop.submit {
            NIOLoopBound(try channel.pipeline.syncOperations.handler(type: HTTP2ClientHandler.self), eventLoop: channel.eventLoop)
        }.get()
        return (channel, handler, events)
    }
}
