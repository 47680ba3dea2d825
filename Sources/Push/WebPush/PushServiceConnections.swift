/// Which push services a Web Push link holds connections to, as a state machine apart from I/O (``WebPushLink`` does
/// what it says). Browsers' endpoints name many push services (one origin each: fcm.googleapis.com, Mozilla's, Apple's,
/// Windows' hosts by the dozen): a connection is opened when a request for its origin first comes, and kept only while
/// it is useful. One with nothing in flight closes after `idle` without a request or an answer; and when a new
/// origin would take more than `limit` connections, the least recently used idle ones close first. Connections with
/// requests in flight are never closed to make room (their number is bounded by the link's window anyway).
///
/// `Handle` is what closes a connection (a channel and its handler); `Pending` what waits for one being opened.
struct PushServiceConnections<Handle, Pending> {
    let limit: Int
    let idle: Duration
    private(set) var origins: [String: Origin] = [:]
    /// Connections open or being opened, and their readers: the link's last event waits for all of them.
    private(set) var parts = 0
    private(set) var closing = false
    private var closedReported = false
    private var nextID = 0

    enum Origin {
        /// Being opened: what was sent for it meanwhile.
        case opening([Pending])
        case open(Open)
    }

    struct Open {
        let id: Int
        let handle: Handle
        /// Requests written and not yet answered, unanswered or timed out.
        var inFlight = 0
        /// The last request written or answer read.
        var lastUsed: ContinuousClock.Instant
        /// Its SETTINGS_MAX_CONCURRENT_STREAMS, once it said.
        var maxStreams: Int?
    }

    init(limit: Int, idle: Duration) {
        self.limit = max(1, limit)
        self.idle = idle
    }

    enum SendStep {
        /// Write them on this connection (counted in flight).
        case write(id: Int, Handle)
        /// Open the origin's connection (they wait for it); close these idle ones first to stay within the limit.
        case open(closing: [Handle])
        /// Its connection is being opened: they wait with what is already waiting.
        case queued
        /// The link is closing: nothing is taken.
        case refused
    }

    /// `pending` (`count` requests) for `origin`.
    mutating func send(_ origin: String, _ pending: [Pending], count: Int, now: ContinuousClock.Instant) -> SendStep {
        guard !closing else { return .refused }
        switch origins[origin] {
        case .open(var open):
            open.inFlight += count
            open.lastUsed = now
            origins[origin] = .open(open)
            return .write(id: open.id, open.handle)
        case .opening(let waiting):
            origins[origin] = .opening(waiting + pending)
            return .queued
        case nil:
            let evicted = makeRoom()
            origins[origin] = .opening(pending)
            parts += 1
            return .open(closing: evicted)
        }
    }

    /// Idle connections, least recently used first, removed until one more fits within the limit.
    private mutating func makeRoom() -> [Handle] {
        guard origins.count >= limit else { return [] }
        let idle = origins.compactMap { origin, state -> (String, Open)? in
            if case .open(let open) = state, open.inFlight == 0 { return (origin, open) }
            return nil
        }.sorted { $0.1.lastUsed < $1.1.lastUsed }
        return idle.prefix(origins.count - limit + 1).map { origin, open in
            origins[origin] = nil
            return open.handle
        }
    }

    enum Opened {
        /// Write what waited on it (counted in flight), then read it.
        case use(id: Int, waiting: [Pending])
        /// The link closed meanwhile: close it; what waited goes back unanswered.
        case close(waiting: [Pending])
    }

    /// The origin's connection is open; `count` is how many requests `waiting` holds, as ``waiting(_:)`` reads it.
    mutating func opened(_ origin: String, _ handle: Handle, now: ContinuousClock.Instant, count: ([Pending]) -> Int) -> Opened {
        guard case .opening(let waiting) = origins[origin] else { return .close(waiting: []) }
        guard !closing else {
            origins[origin] = nil
            return .close(waiting: waiting)
        }
        nextID += 1
        origins[origin] = .open(Open(id: nextID, handle: handle, inFlight: count(waiting), lastUsed: now))
        return .use(id: nextID, waiting: waiting)
    }

    /// The origin's connection could not be opened: what waited for it, to be answered as the failure says.
    mutating func failed(_ origin: String) -> [Pending] {
        guard case .opening(let waiting) = origins[origin] else { return [] }
        origins[origin] = nil
        return waiting
    }

    /// `count` of connection `id`'s requests came back (answered, unanswered or timed out).
    mutating func settled(_ origin: String, id: Int, count: Int, now: ContinuousClock.Instant) {
        guard case .open(var open) = origins[origin], open.id == id else { return }
        open.inFlight = max(0, open.inFlight - count)
        open.lastUsed = now
        origins[origin] = .open(open)
    }

    /// Connection `id` takes no new requests (it is going away or gone): the next request for the origin opens another.
    mutating func retire(_ origin: String, id: Int) {
        if case .open(let open) = origins[origin], open.id == id { origins[origin] = nil }
    }

    /// Connection `id` said how many streams it allows: the link's window, the least any open connection allows.
    mutating func maxStreams(_ origin: String, id: Int, _ value: Int) -> Int {
        if case .open(var open) = origins[origin], open.id == id {
            open.maxStreams = value
            origins[origin] = .open(open)
        }
        return
            origins.values.compactMap { origin -> Int? in
                if case .open(let open) = origin { return open.maxStreams }
                return nil
            }.min() ?? value
    }

    /// The connections idle for `idle` with nothing in flight, removed: to be closed.
    mutating func idleConnections(now: ContinuousClock.Instant) -> [Handle] {
        var closed: [Handle] = []
        for (origin, state) in origins {
            guard case .open(let open) = state, open.inFlight == 0, now - open.lastUsed >= idle else { continue }
            origins[origin] = nil
            closed.append(open.handle)
        }
        return closed
    }

    /// Open connections, for the figures.
    var openCount: Int {
        origins.values.count { if case .open = $0 { true } else { false } }
    }

    /// The link closes: every open connection, to be closed; true when nothing is left to wait for (the link's last
    /// event is due now).
    mutating func close() -> (open: [Handle], done: Bool) {
        closing = true
        let open = origins.values.compactMap { origin -> Handle? in
            if case .open(let open) = origin { return open.handle }
            return nil
        }
        let done = parts == 0 && !closedReported
        if done { closedReported = true }
        return (open, done)
    }

    /// A connection (or an attempt at one) is over; true when it was the last of a closing link's (its last event is
    /// due now).
    mutating func partFinished() -> Bool {
        parts -= 1
        guard closing, parts == 0, !closedReported else { return false }
        closedReported = true
        return true
    }
}

extension PushServiceConnections: Sendable where Handle: Sendable, Pending: Sendable {}
extension PushServiceConnections.Origin: Sendable where Handle: Sendable, Pending: Sendable {}
extension PushServiceConnections.Open: Sendable where Handle: Sendable {}
