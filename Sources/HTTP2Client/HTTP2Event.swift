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
    /// The connection ended (always the last event), and how.
    case closed(String, HTTP2Ending)
}

/// How an HTTP/2 connection ended, for what the next one does and how loud the log is.
package enum HTTP2Ending: Sendable, Equatable {
    /// This client closed it (GOAWAY NO_ERROR), or the server ended it after its own GOAWAY.
    case orderly
    /// It dropped without a word (reset, end of stream, or a server that broke the protocol).
    case dropped
    /// TLS refused: the server turned down our client certificate (an alert), or the handshake failed.
    case refused
    /// The server stopped answering: a PING went unanswered and the connection was closed as dead.
    case stalled
    /// TLS chose another protocol than HTTP/2 over ALPN (HTTP/1.1, or none): nothing was sent. A client that offered
    /// HTTP/1.1 beside it (a browser's push service) may go on over HTTP/1.1.
    case notHTTP2
}
