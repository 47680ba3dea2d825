import APNsTransport
import NIOCore
import NIOEmbedded
import NIOHTTP2

/// A client channel with ``HTTP2ClientHandler`` and a server channel with NIOHTTP2's own handler, joined in memory:
/// ``pump()`` carries bytes both ways until both are quiet; ``received`` is every frame the server has read.
final class HTTP2Pair {
    let client: EmbeddedChannel
    let server: EmbeddedChannel
    private let recorder = Recorder()

    init(client handler: HTTP2ClientHandler, serverSettings: HTTP2Settings) throws {
        client = EmbeddedChannel()
        server = EmbeddedChannel()
        try server.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .server, initialSettings: serverSettings))
        try server.pipeline.syncOperations.addHandler(recorder)
        try client.pipeline.syncOperations.addHandler(handler)
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: 443)
        try client.connect(to: address).wait()
        try server.connect(to: address).wait()
    }

    var received: [HTTP2Frame] { recorder.frames }

    /// DATA bytes the server has read on `stream`.
    func bodyBytes(on stream: HTTP2StreamID) -> Int {
        received.reduce(0) { total, frame in
            guard frame.streamID == stream, case .data(let data) = frame.payload, case .byteBuffer(let bytes) = data.data else {
                return total
            }
            return total + bytes.readableBytes
        }
    }

    /// The server writes `frames`; then both ends talk until quiet (each side's bytes as one read for the client).
    func answer(_ frames: [HTTP2Frame]) throws {
        for frame in frames { server.write(frame, promise: nil) }
        server.flush()
        try pump()
    }

    func pump() throws {
        var moved = true
        while moved {
            moved = false
            while let bytes = try client.readOutbound(as: ByteBuffer.self) {
                try server.writeInbound(bytes)
                moved = true
            }
            var toClient: ByteBuffer?
            while let data = try server.readOutbound(as: IOData.self) {
                guard case .byteBuffer(var bytes) = data else { continue }
                if toClient == nil { toClient = bytes } else { toClient!.writeBuffer(&bytes) }
            }
            if let toClient, client.isActive {
                client.pipeline.fireChannelRead(toClient)
                client.pipeline.fireChannelReadComplete()
                moved = true
            }
        }
    }

    private final class Recorder: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame
        var frames: [HTTP2Frame] = []

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            frames.append(unwrapInboundIn(data))
        }
    }
}
