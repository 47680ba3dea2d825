import APNs
import APNsTransport
import HTTP2Client
package import Logging
package import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import ServiceLifecycle
import Settings
import Support

/// A stand-in for Apple's side on loopback: the binary gateway, the feedback service and a read-only status page.
///
/// Use ``withRunning(_:)`` in tests (ports are known inside the closure), or run it as a `Service`.
package final class APNsSimulator: Service, Sendable {
    /// The listeners' actual ports (useful when configured as 0).
    package struct Ports: Sendable {
        package let gateway: Int
        package let feedback: Int
        package let http2: Int
        package let status: Int?
        /// The Google side (FCM and the OAuth token endpoint), when configured.
        package var fcm: Int? = nil
        /// The browsers' push service, when configured.
        package var webPush: Int? = nil

        package init(gateway: Int, feedback: Int, http2: Int, status: Int?, fcm: Int? = nil) {
            (self.gateway, self.feedback, self.http2, self.status, self.fcm) = (gateway, feedback, http2, status, fcm)
        }
    }

    package let state: SimulatorState
    let configuration: SimulatorConfiguration
    let logger: Logger
    let tlsContext: NIOSSLContext
    let http2TLSContext: NIOSSLContext
    let http2Faults: HTTP2FaultState
    /// The access tokens the Google side issued, and its faults.
    package let fcmAuth: FCMAuthState
    let group: any EventLoopGroup
    let ownsGroup: Bool

    deinit {
        if ownsGroup { group.shutdownGracefully { _ in } }
    }

    /// - Parameters:
    ///   - group: defaults to threads of its own, so a busy process (tests, benchmarks) cannot delay the gateway's
    ///     reads behind other work.
    ///   - threads: how many, without `group`: the connections are served on them in turn (with one, a broadcast's
    ///     connections and chat's share it, and chat's requests wait unread behind the broadcast's).
    package init(
        configuration: SimulatorConfiguration,
        logger: Logger,
        group: (any EventLoopGroup)? = nil,
        threads: Int = 1
    ) throws {
        self.configuration = configuration
        self.logger = logger
        self.ownsGroup = group == nil
        self.group = group ?? MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads))
        self.state = try SimulatorState(configuration: configuration)
        self.tlsContext = try Self.serverContext(configuration)
        self.http2TLSContext = try Self.serverContext(configuration, http2: true)
        self.http2Faults = HTTP2FaultState(configuration.http2)
        self.fcmAuth = FCMAuthState(configuration.fcm)
    }

    /// TLS that requires a client certificate signed by the configured CA, as Apple's gateway does.
    /// For HTTP/2: ALPN h2, and a client certificate is optional (token authentication needs none), but checked
    /// against the CA when one is presented.
    /// `alpn`: the protocols offered with HTTP/2's settings (the browsers' push service: HTTP/1.1 beside it).
    static func serverContext(_ configuration: SimulatorConfiguration, http2: Bool = false, alpn: [String] = ["h2"]) throws -> NIOSSLContext
    {
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(configuration.serverCertificate).map { NIOSSLCertificateSource.certificate($0) }
            let key = try NIOSSLPrivateKey(file: configuration.serverKey, format: .pem)
            var tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
            tls.minimumTLSVersion = .tlsv12
            tls.certificateVerification = http2 ? .optionalVerification : .noHostnameVerification
            tls.trustRoots = .file(configuration.clientCA)
            if http2 { tls.applicationProtocols = alpn }
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw SimulatorError(
                reason: "cannot load the TLS files (\(configuration.serverCertificate), \(configuration.serverKey), "
                    + "\(configuration.clientCA)); create them with deploy/dev-certs.sh DIR: \(error)"
            )
        }
    }

    /// Starts every listener, runs `body`, then closes them.
    package func withRunning<T: Sendable>(_ body: (Ports) async throws -> T) async throws -> T {
        let gateway = try await bind(port: configuration.gatewayPort) { [state, logger, tlsContext] channel in
            guard let connection = state.connectionOpened() else {
                logger.debug("Refusing a gateway connection (fault injection)")
                return channel.close()
            }
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tlsContext))
                try channel.pipeline.syncOperations.addHandler(GatewayHandler(state: state, connection: connection, logger: logger))
            }
        }
        let feedback: any Channel
        do {
            feedback = try await bind(port: configuration.feedbackPort) { [state, logger, tlsContext] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(UncleanCloser())
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tlsContext))
                    try channel.pipeline.syncOperations.addHandler(FeedbackHandler(state: state, logger: logger))
                }
            }
        } catch {
            try? await gateway.close()
            throw error
        }
        let http2: any Channel
        do {
            http2 = try await bindHTTP2(port: configuration.http2Port) { [state, logger, http2Faults, configuration] connection in
                HTTP2Handler(options: configuration.http2, state: state, faults: http2Faults, connection: connection, logger: logger)
            }
        } catch {
            try? await gateway.close()
            try? await feedback.close()
            throw error
        }
        var fcm: (any Channel)?
        if let fcmPort = configuration.fcmPort {
            do {
                fcm = try await bindHTTP2(port: fcmPort) { [state, logger, fcmAuth, configuration] connection in
                    FCMHandler(options: configuration.fcm, auth: fcmAuth, state: state, connection: connection, logger: logger)
                }
            } catch {
                try? await gateway.close()
                try? await feedback.close()
                try? await http2.close()
                throw error
            }
        }
        var webPush: (any Channel)?
        if let webPushPort = configuration.webPushPort {
            do {
                webPush = try await bindWebPush(port: webPushPort)
                let port = webPush?.localAddress?.port ?? 0
                let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
                state.webPush.origin = "https://\(host)" + (port == 443 ? "" : ":\(port)")
            } catch {
                try? await gateway.close()
                try? await feedback.close()
                try? await http2.close()
                try? await fcm?.close()
                throw error
            }
        }
        defer {
            gateway.close(promise: nil)
            feedback.close(promise: nil)
            http2.close(promise: nil)
            fcm?.close(promise: nil)
            webPush?.close(promise: nil)
        }
        let gatewayPort = gateway.localAddress?.port ?? 0
        let feedbackPort = feedback.localAddress?.port ?? 0
        let http2Port = http2.localAddress?.port ?? 0
        let fcmPort = fcm?.localAddress?.port
        let webPushPort = webPush?.localAddress?.port
        func ports(status: Int?) -> Ports {
            var ports = Ports(gateway: gatewayPort, feedback: feedbackPort, http2: http2Port, status: status, fcm: fcmPort)
            ports.webPush = webPushPort
            return ports
        }
        guard let statusPort = configuration.statusPort else { return try await body(ports(status: nil)) }
        return try await StatusPage.withRunning(host: configuration.host, port: statusPort, state: state, logger: logger) { port in
            try await body(ports(status: port))
        }
    }

    /// Runs until graceful shutdown.
    package func run() async throws {
        try await withRunning { ports in
            let status = ports.status.map { ", status page http://\(configuration.host):\($0)/" } ?? ""
            let fcm = ports.fcm.map { ", FCM and its token endpoint \($0)" } ?? ""
            let webPush = ports.webPush.map { ", the browsers' push service \($0)" } ?? ""
            logger.info(
                "APNs simulator listening on \(configuration.host): gateway \(ports.gateway), feedback \(ports.feedback), HTTP/2 \(ports.http2)\(fcm)\(webPush)\(status)"
            )
            try? await gracefulShutdown()
            logger.info("APNs simulator stopping")
        }
    }

    /// A TLS listener speaking HTTP/2 (ALPN h2, the configured stream limit) whose streams `makeHandler` answers
    /// inline, given the connection's number (Apple's provider API, Google's side).
    private func bindHTTP2(
        port: Int,
        _ makeHandler: @escaping @Sendable (_ connection: Int) -> any ChannelHandler
    ) async throws -> any Channel {
        try await bind(port: port) { [state, http2TLSContext, configuration] channel in
            guard let connection = state.connectionOpened() else { return channel.close() }
            return channel.eventLoop.makeCompletedFuture {
                let settings = [
                    HTTP2Setting(parameter: .maxConcurrentStreams, value: configuration.http2.maxConcurrentStreams),
                    HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                ]
                try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: http2TLSContext))
                try channel.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .server, initialSettings: settings))
                try channel.pipeline.syncOperations.addHandler(HTTP2ConnectionWindowHandler(window: .init(target: 4 << 20)))
                try channel.pipeline.syncOperations.addHandler(makeHandler(connection))
            }
        }
    }

    /// The browsers' push service: HTTP/2 where the client offers it (ALPN h2), else HTTP/1.1 (`http1Only`: always).
    private func bindWebPush(port: Int) async throws -> any Channel {
        let context = try Self.serverContext(
            configuration,
            http2: true,
            alpn: configuration.webPush.http1Only ? ["http/1.1"] : ["h2", "http/1.1"]
        )
        return try await bind(port: port) { [state, configuration, logger] channel in
            guard let connection = state.connectionOpened() else { return channel.close() }
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                let negotiation = ApplicationProtocolNegotiationHandler { result, channel in
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        if case .negotiated("h2") = result {
                            let settings = [
                                HTTP2Setting(parameter: .maxConcurrentStreams, value: configuration.http2.maxConcurrentStreams),
                                HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                            ]
                            try pipeline.addHandler(NIOHTTP2Handler(mode: .server, initialSettings: settings))
                            try pipeline.addHandler(HTTP2ConnectionWindowHandler(window: .init(target: 4 << 20)))
                            try pipeline.addHandler(
                                WebPushHandler(service: state.webPush, state: state, connection: connection, logger: logger)
                            )
                        } else {
                            try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
                            try pipeline.addHandler(WebPushHTTP1Handler(service: state.webPush, state: state, logger: logger))
                        }
                    }
                }
                try channel.pipeline.syncOperations.addHandler(negotiation)
            }
        }
    }

    private func bind(
        port: Int,
        initializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> any Channel {
        do {
            return try await ServerBootstrap(group: group)
                .serverChannelOption(ChannelOptions.backlog, value: 256)
                .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
                .childChannelInitializer(initializer)
                .bind(host: configuration.host, port: port)
                .get()
        } catch {
            throw SimulatorError(reason: "cannot listen on \(configuration.host):\(port): \(error)")
        }
    }
}
