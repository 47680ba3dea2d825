import APNsTransport
import HTTP2Client
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

    /// Every byte the client has written, as the server read them.
    private(set) var clientBytes: [UInt8] = []

    /// The header block (HEADERS and its CONTINUATIONs) of each stream the client opened, as the bytes on the wire:
    /// the client's own HPACK, before any decoder reads it.
    func headerBlocks() -> [UInt32: [UInt8]] {
        var blocks: [UInt32: [UInt8]] = [:]
        var offset = 24  // the connection preface
        while offset + 9 <= clientBytes.count {
            let length = Int(clientBytes[offset]) << 16 | Int(clientBytes[offset + 1]) << 8 | Int(clientBytes[offset + 2])
            let (type, flags) = (clientBytes[offset + 3], clientBytes[offset + 4])
            let stream = clientBytes[(offset + 5)..<(offset + 9)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7fff_ffff
            var payload = Array(clientBytes[(offset + 9)..<min(offset + 9 + length, clientBytes.count)])
            if type == 0x1 {  // HEADERS: without the padding and the priority fields, if flagged
                var start = 0
                var end = payload.count
                if flags & 0x8 != 0 {
                    end -= Int(payload[0])
                    start += 1
                }
                if flags & 0x20 != 0 { start += 5 }
                payload = Array(payload[start..<end])
            }
            if type == 0x1 || type == 0x9 { blocks[stream, default: []] += payload }
            offset += 9 + length
        }
        return blocks
    }

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
                clientBytes += bytes.readableBytesView
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
