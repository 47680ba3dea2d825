import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import Observability
import Settings
import Storage
import Support

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

/// Added by Hummingbird after its HTTP-types conversion; puts ``HTTP10ConnectionHandler`` before that conversion.
final class HTTP10ConnectionInstaller: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Any

    func handlerAdded(context: ChannelHandlerContext) {
        let pipeline = context.pipeline.syncOperations
        if let codec = try? pipeline.handler(type: HTTP1ToHTTPServerCodec.self) {
            try? pipeline.addHandler(HTTP10ConnectionHandler(), position: .before(codec))
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }
}
