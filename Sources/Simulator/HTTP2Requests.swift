import NIOCore
import NIOHPACK
import NIOHTTP2

/// The requests arriving on one HTTP/2 connection of the simulator (Apple's API or Google's), gathered stream by
/// stream from the frames the handler reads inline: the headers, then the body, until the stream ends.
struct HTTP2Requests {
    struct Request {
        var headers: HPACKHeaders
        var body = ByteBuffer()
    }

    /// The most body bytes kept per request (what a peer sends past it is dropped).
    let maximumBody: Int
    private var open: [HTTP2StreamID: Request] = [:]

    init(maximumBody: Int = .max) { self.maximumBody = maximumBody }

    /// Takes one frame; the request it completed (its stream ended), if any.
    mutating func read(_ frame: HTTP2Frame) -> (HTTP2StreamID, Request)? {
        switch frame.payload {
        case .headers(let headers):
            if open[frame.streamID] == nil { open[frame.streamID] = Request(headers: headers.headers) }
            if headers.endStream { return finish(frame.streamID) }
        case .data(let data):
            if case .byteBuffer(var buffer) = data.data, let size = open[frame.streamID]?.body.readableBytes, size < maximumBody {
                open[frame.streamID]?.body.writeBuffer(&buffer)
            }
            if data.endStream { return finish(frame.streamID) }
        case .rstStream:
            open[frame.streamID] = nil
        default:
            break
        }
        return nil
    }

    /// Forgets a stream NIOHTTP2 reset.
    mutating func drop(_ streamID: HTTP2StreamID) { open[streamID] = nil }

    private mutating func finish(_ streamID: HTTP2StreamID) -> (HTTP2StreamID, Request)? {
        open.removeValue(forKey: streamID).map { (streamID, $0) }
    }
}
