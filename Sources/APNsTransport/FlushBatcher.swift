package import NIOCore
import NIOHTTP2

/// Between TLS and NIOHTTP2: while held, a flush only notes that one is due; ``release()`` passes one on.
///
/// NIOHTTP2 sends the DATA frames made flushable by one flush in hash-set order, so a batch of requests flushed
/// once reaches the server out of stream order, is answered out of order, and NIOHTTP2 then removes streams from the
/// middle of its stream maps (shifting every later entry) on both ends. Flushing after every stream instead keeps
/// them in order (closing the oldest is cheap), and this handler makes the batch one TLS write.
package final class FlushBatcher: ChannelOutboundHandler, RemovableChannelHandler {
    package typealias OutboundIn = IOData
    package typealias OutboundOut = IOData

    package init() {}

    private var context: ChannelHandlerContext?
    private var holding = false
    private var due = false

    package func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    package func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    package func flush(context: ChannelHandlerContext) {
        if holding {
            due = true
        } else {
            context.flush()
        }
    }

    /// Holds flushes until ``release()``. Both within one synchronous call on the event loop (a hold kept across
    /// reads was seen to strand an answer when NIOHTTP2 delivered frames outside a read).
    package func hold() { holding = true }

    /// Passes on one flush if any was held.
    package func release() {
        holding = false
        if due, let context {
            due = false
            context.flush()
        }
    }
}
