package import NIOCore
package import NIOHTTP2

/// The bookkeeping of one HTTP/2 connection to a push service, as a value: which stream carries which request, what
/// the server has answered, GOAWAY, the PING that checks an idle connection, and the end. Events go in, an action
/// comes out; ``HTTP2ClientHandler`` performs it (writes frames, reports to the worker, closes). Tested without a
/// channel.
///
/// Every request that goes in comes out exactly once: answered, or unanswered (reset, timed out, refused by
/// GOAWAY, the connection ended, stream ids used up) — never lost, never twice.
package struct HTTP2StreamStateMachine {
    struct Stream {
        var request: HTTP2Request
        var deadline: NIODeadline
        var status = 0
        var body: [UInt8] = []
        /// The answer's `retry-after` header (FCM's 429 and 503).
        var retryAfter: String?
    }

    /// The highest stream id the connection may use (client streams are odd, at most 2^31 − 1). Past it, the
    /// connection takes no new streams: it is retired and the worker opens another.
    package static let defaultLastStreamID = Int(Int32.max)

    private var streams: [HTTP2StreamID: Stream] = [:]
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS: no limit until its SETTINGS say (RFC 9113 §6.5.2). The worker
    /// keeps below it; this holds whatever the worker does (a lowered limit it has not heard of yet).
    private(set) var maxConcurrentStreams = Int.max
    private var nextStreamID = 1
    private let lastStreamID: Int
    private var goingAway = false
    private var lastRead: NIODeadline
    private var pingSentAt: NIODeadline?
    private(set) var finished = false
    package let requestTimeout: TimeAmount
    let pingInterval: TimeAmount

    package init(
        requestTimeout: TimeAmount,
        pingInterval: TimeAmount = .seconds(30),
        lastStreamID: Int = Self.defaultLastStreamID,
        now: NIODeadline = .now()
    ) {
        precondition(lastStreamID >= 1 && lastStreamID <= Self.defaultLastStreamID, "stream ids are 1…2^31 − 1")
        self.requestTimeout = requestTimeout
        self.pingInterval = pingInterval
        self.lastStreamID = lastStreamID
        self.lastRead = now
    }

    /// Requests waiting for an answer.
    package var inFlight: Int { streams.count }

    // MARK: Sending

    package enum SendAction {
        /// The connection has ended: nothing was taken (the caller keeps the requests).
        case refused
        /// Write each request on its stream; `unanswered` come back at once (GOAWAY received, or stream ids used up);
        /// `retired`: this connection just ran out of stream ids (report GOAWAY-like: no new streams here).
        case write([(HTTP2StreamID, HTTP2Request)], unanswered: [HTTP2Request], reason: String, retired: Bool)
    }

    /// A stream this client has not opened yet (RFC 9113 §5.1: idle): the server may send nothing on it.
    package func isIdle(_ streamID: HTTP2StreamID) -> Bool { Int(streamID) >= nextStreamID }

    package mutating func send(_ requests: [HTTP2Request], now: NIODeadline) -> SendAction {
        guard !finished else { return .refused }
        guard !goingAway else { return .write([], unanswered: requests, reason: "the connection is going away", retired: false) }
        let deadline = now + requestTimeout
        let ids = max(0, (lastStreamID - nextStreamID) / 2 + 1)
        let concurrent = max(0, maxConcurrentStreams - streams.count)
        let room = min(ids, concurrent)
        var written: [(HTTP2StreamID, HTTP2Request)] = []
        written.reserveCapacity(min(room, requests.count))
        for request in requests.prefix(room) {
            let streamID = HTTP2StreamID(nextStreamID)
            nextStreamID += 2
            streams[streamID] = Stream(request: request, deadline: deadline)
            written.append((streamID, request))
        }
        let left = Array(requests.dropFirst(written.count))
        let retired = nextStreamID > lastStreamID
        if retired { goingAway = true }
        let reason =
            !left.isEmpty && concurrent < ids
            ? "over the server's SETTINGS_MAX_CONCURRENT_STREAMS (\(maxConcurrentStreams))"
            : "the connection's stream ids are used up"
        return .write(written, unanswered: left, reason: reason, retired: retired)
    }

    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS. Streams already open above a lowered limit stay open (§5.1.2);
    /// no new one opens until they are below it.
    package mutating func maxConcurrentStreams(_ value: Int) { maxConcurrentStreams = max(0, value) }

    // MARK: Reading

    /// Any frame arrived: the connection is alive.
    package mutating func read(now: NIODeadline) { lastRead = now }

    /// A stream's HEADERS: its status; the answer when the stream ended with them.
    package mutating func headers(_ streamID: HTTP2StreamID, status: Int?, retryAfter: String? = nil, endStream: Bool) -> HTTP2Answer? {
        if let status { streams[streamID]?.status = status }
        if let retryAfter { streams[streamID]?.retryAfter = retryAfter }
        return endStream ? complete(streamID) : nil
    }

    /// The most bytes of one answer's body kept (Apple's are `{"reason":"…","timestamp":…}`): what a peer sends past
    /// it is dropped, not kept (a 10 MB answer per stream would hold a window's worth of them in memory).
    package static let maxAnswerBody = 4096

    /// A stream's DATA; the answer when the stream ended with it.
    package mutating func data(_ streamID: HTTP2StreamID, _ bytes: ByteBufferView, endStream: Bool) -> HTTP2Answer? {
        if streams[streamID] != nil {
            let room = Self.maxAnswerBody - streams[streamID]!.body.count
            if room > 0 { streams[streamID]!.body += bytes.prefix(room) }
        }
        return endStream ? complete(streamID) : nil
    }

    private mutating func complete(_ streamID: HTTP2StreamID) -> HTTP2Answer? {
        guard let stream = streams.removeValue(forKey: streamID) else { return nil }
        return HTTP2Answer(request: stream.request, status: stream.status, body: stream.body, retryAfter: stream.retryAfter)
    }

    /// RST_STREAM from the server (``HTTP2FrameReader`` read it): the request, to send again.
    package mutating func reset(_ streamID: HTTP2StreamID) -> HTTP2Request? {
        streams.removeValue(forKey: streamID)?.request
    }

    /// GOAWAY: streams above `lastStreamID` were not processed (safe to send again); the rest are still answered.
    package mutating func goAway(lastStreamID: HTTP2StreamID) -> [HTTP2Request] {
        goingAway = true
        let refused = streams.keys.filter { $0 > lastStreamID }.sorted()
        return refused.compactMap { streams.removeValue(forKey: $0)?.request }
    }

    /// The PING we sent was answered.
    package mutating func pingAnswered() { pingSentAt = nil }

    // MARK: Time

    package struct TickAction {
        /// Streams past their deadline: reset them and send their requests again.
        package var expired: [(HTTP2StreamID, HTTP2Request)] = []
        /// Send a PING (the connection has been quiet for the ping interval).
        package var ping = false
        /// Close the connection: the server did not answer a PING.
        package var close: String?
    }

    /// Every tick of the handler's timer: deadlines, and the PING that tells a quiet connection from a dead one.
    package mutating func tick(now: NIODeadline) -> TickAction {
        var action = TickAction()
        guard !finished else { return action }
        let expired = streams.filter { $0.value.deadline <= now }.keys.sorted()
        action.expired = expired.compactMap { id in streams.removeValue(forKey: id).map { (id, $0.request) } }
        if let pingSentAt, now - pingSentAt > requestTimeout {
            action.close = "the server did not answer a PING"
        } else if pingSentAt == nil, now - lastRead > pingInterval {
            pingSentAt = now
            action.ping = true
        }
        return action
    }

    // MARK: The end

    /// The connection ended (closed, failed, handler removed): every request still waiting, once; nil when it had
    /// already ended.
    package mutating func finish() -> [HTTP2Request]? {
        guard !finished else { return nil }
        finished = true
        let requests = streams.keys.sorted().compactMap { streams[$0]?.request }
        streams = [:]
        return requests
    }
}
