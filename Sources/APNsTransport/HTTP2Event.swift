package import APNs
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Support

/// What an HTTP/2 connection reports to its worker.
package enum HTTP2Event: Sendable {
    /// Answers that arrived in one read from the socket, in order.
    case answered([HTTP2Answer])
    /// Written but not answered (timeout, reset, GOAWAY, connection lost): safe to send again.
    case unanswered([HTTP2Request], String)
    /// Written, no answer within the request timeout (the streams were cancelled): safe to send again, with fewer
    /// at once: the server answers slower than this many streams allow.
    case timedOut([HTTP2Request], Duration)
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS.
    case maxStreams(Int)
    /// GOAWAY (its code and debug data), or the stream ids are used up: no new streams on this connection.
    case goingAway(String)
    case closed(String)
}
