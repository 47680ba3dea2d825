import APNs
import Foundation

/// A place notifications go — Apple's binary gateway, Apple's HTTP/2 API, Firebase Cloud Messaging. A
/// destination knows its wire and nothing else: how to open a connection with its credentials and how to encode a
/// row; its link reports each answer with what it means (a ``Verdict``, from the destination's own `verdict`, tested
/// apart in `VerdictTests`: the driver only ever sees verdicts). ``SenderDriver`` does the rest, the same for every
/// destination:
/// claiming rows under lease, keeping them ahead of the connection, recording results, sending again what went
/// unanswered, reconnecting with backoff, opening extra connections on demand, shutting down, and the figures.
///
/// Adding a destination is a folder with a type that conforms to this protocol and one to ``DestinationLink`` (see
/// docs/ARCHITECTURE.md, "Adding a destination").
protocol Destination: Sendable {
    /// One row as it goes on the wire (an HTTP/2 request, a binary frame's fields).
    associatedtype Request: Sendable
    associatedtype Link: DestinationLink where Link.Request == Request

    /// `gateway.push.apple.com:2195`, for logs.
    var endpoint: String { get }

    /// Which interface, after the connection's log lines (`Connection OK (HTTP/2)`, as the guide quotes them); empty
    /// for the binary interface.
    var interface: String { get }

    /// What the driver logs when ``withLink(_:)`` has given it a link (`Connection OK (HTTP/2)`): by default the
    /// connection's line; a destination whose link connects later says so (and logs each connection itself).
    var linkOpenedLine: String { get }

    /// Opens a connection with the destination's credentials and runs `body` while it is open; closes it after. A
    /// connection that cannot be opened throws (the driver waits out its backoff and tries again).
    func withLink<Result: Sendable>(_ body: (Link) async -> Result) async throws -> Result

    /// The row as a request, or why it cannot go (for good, or not now). Called for every row, just before it is
    /// written; expired rows never get here.
    func encode(_ row: QueuedNotification, now: Date) -> Encoding<Request>

    /// Whether a lane's connections beyond the first open only while the open ones are saturated (false: all of them
    /// from the start, as over the binary interface, whose rate per connection is its window over `push_settle`).
    var opensConnectionsOnDemand: Bool { get }

    /// Whether encoding a row costs enough (an ECDH per message) that a batch is encoded on every core at once.
    var encodesInParallel: Bool { get }

    /// Where its connections' rows come from, given the lane's: the same, or with what encoding them needs loaded
    /// beside each claim (a browser's subscription).
    func rows(_ rows: any RowSource) -> any RowSource
}

extension Destination {
    var opensConnectionsOnDemand: Bool { true }

    var encodesInParallel: Bool { false }

    var linkOpenedLine: String { "Connection OK\(interface)" }

    func rows(_ rows: any RowSource) -> any RowSource { rows }
}

/// What ``Destination/encode(_:now:)`` made of a row.
enum Encoding<Request> {
    case request(Request)
    /// The row can never be sent this way (a token or payload the destination refuses): failed as `invalid`.
    case invalid(String)
    /// Not now (the credentials cannot be made): the row goes back to the queue and the reason is logged as critical.
    case notNow(String)
}

extension Encoding: Sendable where Request: Sendable {}

/// One open connection to a destination. Its reading side reports ``LinkEvent``s through ``run(_:)``; the driver
/// writes through ``send(_:)`` at most as many requests at once as the last ``LinkEvent/window(_:)`` allows.
protocol DestinationLink: Sendable {
    associatedtype Request: Sendable

    /// Requests allowed in flight when the connection opens, until a ``LinkEvent/window(_:)`` says otherwise.
    var initialWindow: Int { get }

    /// How long the driver waits for the answers to what is in flight once it stops writing (shutdown, GOAWAY, an
    /// idle extra connection) before it closes the connection.
    var drainTimeout: Duration { get }

    /// Reads until the connection ends, reporting every event in order; the last one is ``LinkEvent/closed(_:_:)``,
    /// after every request written has come back as answered or unanswered.
    func run(_ report: @escaping @Sendable (LinkEvent) -> Void) async

    /// Writes the requests; false when the connection took none of them (it has ended; they go to the next one).
    func send(_ requests: [Request]) async -> Bool

    /// Closes the connection: the driver stopped writing and waited ``drainTimeout`` for the answers. What is still in
    /// flight comes back through ``run(_:)`` (as each destination's wire defines it).
    func close() async
}

/// What a connection's reading side reports.
enum LinkEvent: Sendable {
    /// The most requests the far end takes at once now (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); capped by
    /// `push_window`.
    case window(Int)
    /// Answers, in the order they arrived, each with what it means.
    case answered([Answer])
    /// Written and not answered (reset, GOAWAY, the connection lost or discarded them): sent again, first; they may
    /// have arrived (possible duplicates).
    case unanswered([QueuedNotification], reason: String)
    /// Written, no answer within `after`: sent again, and half as many at once from now on.
    case timedOut([QueuedNotification], after: Duration)
    /// The connection takes no new requests (GOAWAY, and what the server said); what is in flight is still answered.
    case goingAway(String)
    /// The connection ended (always the last event).
    case closed(String, LinkEnding)
}

/// How a connection ended, for what the next one does.
enum LinkEnding: Sendable, Equatable {
    /// The far end ended it in order, having answered (an error response, GOAWAY), or the driver closed it.
    case orderly
    /// It dropped without a word: how much arrived is unknown.
    case dropped
    /// The far end refused our credentials (TLS): nothing was accepted.
    case refused
    /// The far end stopped reading: the connection was closed as dead.
    case stalled
}
