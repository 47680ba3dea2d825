import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// The tutorial's server answered HTTP/1.0 and closed the connection: a request without keep-alive (HTTP/1.0
/// without `Connection: keep-alive`, or HTTP/1.1 with `Connection: close`) gets its answer with
/// `Connection: close` and then the connection ends. Hummingbird's HTTP/1 channel sees requests only after they
/// are converted to HTTP types, which drop the version; this handler sits before that conversion and marks such a
/// request `Connection: close`, which Hummingbird honours.
final class HTTP10ConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private var closeAfterResponse = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var part = unwrapInboundIn(data)
        if case .head(var head) = part, !head.isKeepAlive {
            closeAfterResponse = true
            head.headers.replaceOrAdd(name: "connection", value: "close")
            part = .head(head)
        }
        context.fireChannelRead(wrapInboundOut(part))
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        var part = unwrapOutboundIn(data)
        if closeAfterResponse, case .head(var head) = part {
            head.headers.replaceOrAdd(name: "connection", value: "close")
            part = .head(head)
        }
        context.write(wrapOutboundOut(part), promise: promise)
    }
}

/// Added by Hummingbird after its HTTP-types conversion; puts the handlers that must see the HTTP/1 parts (or the raw
/// bytes) where they can: ``ConnectionGuard``'s two sides and ``HTTP10ConnectionHandler``.
final class HTTPConnectionInstaller: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Any
    let guardian: ConnectionGuard?

    /// `guardian`: nil to install only the HTTP/1.0 handling (no limits).
    init(guardian: ConnectionGuard?) { self.guardian = guardian }

    func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        guard let codec = try? pipeline.handler(type: HTTP1ToHTTPServerCodec.self) else { return }
        try? pipeline.addHandler(HTTP10ConnectionHandler(), position: .before(codec))
        if let guardian {
            try? pipeline.addHandler(ConnectionGuard.RequestSide(guardian), position: .before(codec))
            try? pipeline.addHandler(ConnectionGuard.RawSide(guardian), position: .first)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }
}
