import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Shared

/// Opens TLS connections to the binary gateway with the provider's client certificate.
public struct GatewayConnector: Sendable {
    public let endpoint: Endpoint
    let tls: NIOSSLContext
    let group: any EventLoopGroup
    let timeout: Duration

    public init(
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
    public func connect() async throws -> (NIOAsyncChannel<ByteBuffer, ByteBuffer>, GatewayAlarm) {
        let alarm = GatewayAlarm()
        let isAddress = (try? SocketAddress(ipAddress: endpoint.host, port: endpoint.port)) != nil
        let serverHostname = isAddress ? nil : endpoint.host
        let tls = self.tls
        let connected: (NIOAsyncChannel<ByteBuffer, ByteBuffer>, EventLoopFuture<Void>)
        do {
            connected = try await ClientBootstrap(group: group)
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
            throw GatewayError(endpoint: endpoint, reason: Self.describe(error))
        }
        let (channel, handshake) = connected
        do {
            try await withDeadline(timeout) { try await handshake.get() }
        } catch {
            try? await channel.channel.close()
            throw GatewayError(endpoint: endpoint, reason: Self.describe(error))
        }
        return (channel, alarm)
    }

    /// A readable reason for a connection or TLS failure (refused client certificates are named as such).
    public static func describe(_ error: any Error) -> String {
        if let error = error as? NIOSSLError, case .handshakeFailed(let reason) = error {
            return "TLS handshake failed (is the certificate valid for this gateway and signed by the right CA?): \(reason)"
        }
        let text = "\(error)"
        // With TLS 1.3 the gateway checks the client certificate after the handshake and answers with an alert.
        for alert in [
            "ALERT_UNKNOWN_CA", "ALERT_BAD_CERTIFICATE", "ALERT_CERTIFICATE_REQUIRED", "ALERT_CERTIFICATE_REVOKED",
            "ALERT_CERTIFICATE_EXPIRED", "ALERT_ACCESS_DENIED",
        ]
        where text.contains(alert) {
            return "the gateway refused the client certificate (\(alert.replacingOccurrences(of: "ALERT_", with: "")))"
        }
        if error is DeadlineExceeded { return "TLS handshake timed out" }
        if let error = error as? ChannelError, case .connectTimeout = error { return "connection timed out" }
        if "\(error)".contains("Connection refused") { return "connection refused" }
        return "\(error)"
    }
}

/// Why the gateway could not be reached.
public struct GatewayError: Error, CustomStringConvertible {
    public let endpoint: Endpoint
    public let reason: String
    public var description: String { "cannot connect to \(endpoint): \(reason)" }
}

/// Completes a promise when the TLS handshake is done, or fails it if the connection goes first.
final class HandshakeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var promise: EventLoopPromise<Void>?

    init(promise: EventLoopPromise<Void>) { self.promise = promise }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            promise?.succeed()
            promise = nil
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise?.fail(error)
        promise = nil
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise?.fail(ChannelError.eof)
        promise = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // The connection never came up (refused, timed out): the pipeline goes without channelInactive.
        promise?.fail(ChannelError.ioOnClosedChannel)
        promise = nil
    }
}

/// Raised as soon as the gateway sends a byte or the connection ends. The binary gateway only ever speaks to report
/// an error, so from then on nothing written may be counted as accepted until the error response is read.
public final class GatewayAlarm: Sendable {
    private let raised = NIOLockedValueBox(false)

    public init() {}

    public var isRaised: Bool { raised.withLockedValue { $0 } }

    func raise() { raised.withLockedValue { $0 = true } }
}

/// Raises the alarm on the event loop, before the bytes reach the reading task (which may be scheduled late).
final class AlarmHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let alarm: GatewayAlarm

    init(alarm: GatewayAlarm) { self.alarm = alarm }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        alarm.raise()
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        alarm.raise()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        alarm.raise()
        context.fireErrorCaught(error)
    }
}
