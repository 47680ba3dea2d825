import APNsTransport
import Foundation
import NIOCore
import NIOPosix
import NIOSSL

@testable import API
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Storage
@testable import Support

/// A bare TLS (or plain TCP) client for poking at the simulator: writes bytes, then returns everything the peer
/// sends until it closes the connection.
enum TLSTestClient {
    static func exchange(
        port: Int,
        tls: NIOSSLContext?,
        send: ByteBuffer = ByteBuffer(),
        timeout: Duration = .seconds(10),
        from source: String? = nil,
        keepOpenUntil condition: (@Sendable () -> Bool)? = nil
    ) async throws -> ByteBuffer {
        try await withDeadline(timeout) {
            var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            if let source { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: source, port: 0)) }
            let channel =
                try await bootstrap
                .connect(host: "127.0.0.1", port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let tls {
                            try channel.pipeline.syncOperations.addHandler(
                                try NIOSSLClientHandler(context: tls, serverHostname: "localhost")
                            )
                        }
                        return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
            return try await channel.executeThenClose { inbound, outbound in
                if send.readableBytes > 0 { try await outbound.write(send) }
                if let condition {
                    // The peer keeps a good connection open: wait for what the test expects, then hang up.
                    while !condition() { try await Task.sleep(for: .milliseconds(5)) }
                    return ByteBuffer()
                }
                var received = ByteBuffer()
                for try await chunk in inbound { received.writeImmutableBuffer(chunk) }
                return received
            }
        }
    }

    /// A TLS context presenting the identity in `certificateFile` and trusting the test CA.
    static func context(identity certificateFile: String?, passphrase: String? = TestCertificates.passphrase) throws -> NIOSSLContext {
        guard let certificateFile else {
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.additionalTrustRoots = [.file(TestCertificates.path("ca.pem"))]
            return try NIOSSLContext(configuration: configuration)
        }
        let identity = try ClientIdentity.load(path: certificateFile, passphrase: passphrase)
        return try GatewayTLS.clientContext(identity: identity, caFile: TestCertificates.path("ca.pem"))
    }

    /// Plain HTTP/1.0 GET, for the status page.
    static func get(port: Int, path: String) async throws -> String {
        try await LoopbackHTTP.get(port: port, path: path).body
    }
}
