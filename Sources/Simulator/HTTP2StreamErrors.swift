import NIOCore
import NIOHTTP2

/// NIOHTTP2 reports errors that concern one stream (a frame for a stream already reset or closed, e.g. a late answer
/// to a request that timed out) through `errorCaught` too, after resetting that stream; the connection stays usable.
enum HTTP2StreamErrors {
    /// The stream `error` is limited to, or nil when it ends the connection.
    static func stream(of error: any Error) -> HTTP2StreamID? {
        switch error {
        case let error as NIOHTTP2Errors.StreamClosed: error.streamID
        case let error as NIOHTTP2Errors.NoSuchStream: error.streamID
        default: nil
        }
    }
}
