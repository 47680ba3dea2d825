import APNs

/// One binary gateway connection's state as a value: the sent window, the rows waiting to be written, the slow-start
/// limit, and how the connection's end settles them. Events go in (``append(_:at:)``, ``settle(writtenBefore:alarmRaised:)``,
/// ``end(_:)``, …) and what to do comes out; ``BinarySession`` shares it between the writer and the reader under a
/// lock. Tested without sockets.
struct BinarySessionState {
    /// How a connection ended.
    enum End: Sendable {
        /// The gateway wrote an error response.
        case errorResponse(BinaryErrorResponse)
        /// The connection ended without one; `refused` when TLS failed (nothing was accepted).
        case closed(String, refused: Bool)
        /// The gateway stopped reading: the connection was closed as dead.
        case stalled(String)
        /// Shutting down: everything written, the gateway given a moment to object, and it did not.
        case drained
    }

    /// What a connection's end means for its rows, and for the next connection.
    struct Settlement {
        /// Accepted: before the row an error response names, or silent (at shutdown).
        var accepted: [QueuedNotification] = []
        /// The row an error response names, with the response.
        var failed: (QueuedNotification, BinaryErrorResponse)?
        /// To write on the next connection, oldest first.
        var carry: [QueuedNotification] = []
        /// Of those, written on this connection without a word (they may have arrived: possible duplicates).
        var resent = 0
        /// The next connection's slow-start limit.
        var nextLimit: Int
        /// The gateway took something: reconnect at once, without backoff.
        var progressed: Bool
    }

    private var window: SentWindow<QueuedNotification>
    private var pending: [QueuedNotification]
    private(set) var stopped = false
    /// Settled by silence or before an error response, on this connection.
    private(set) var delivered = 0
    /// How many notifications may be unsettled at once: grows with every settled one (slow start after a connection
    /// dropped without an error response), up to the window's capacity.
    private(set) var limit: Int

    init(capacity: Int, limit: Int, carry: [QueuedNotification]) {
        window = SentWindow(capacity: capacity)
        pending = carry
        self.limit = max(1, min(limit, capacity))
    }

    /// The reader saw the connection end (or an error response): nothing more settles by time or is written.
    mutating func stop() { stopped = true }

    /// How many more notifications may be written now.
    var freeSpace: Int { max(0, min(window.freeSpace, limit - window.count)) }
    var oldestWrite: ContinuousClock.Instant? { window.oldestWrite }
    var inFlightCount: Int { window.count }

    /// Removes the notifications written before `instant`: accepted by silence. Nothing settles by time once the
    /// gateway has spoken (`alarmRaised`: an error response may be on its way) or the session stopped.
    mutating func settle(writtenBefore instant: ContinuousClock.Instant, alarmRaised: Bool) -> [QueuedNotification] {
        guard !stopped, !alarmRaised else { return [] }
        let settled = window.removeSettled(writtenBefore: instant)
        delivered += settled.count
        limit = min(window.capacity, limit + settled.count)
        return settled
    }

    /// Takes up to `limit` rows waiting to be (re)sent.
    mutating func takePending(limit: Int) -> [QueuedNotification] {
        let taken = Array(pending.prefix(limit))
        pending.removeFirst(taken.count)
        return taken
    }

    /// Rows to write on this connection or, if it has ended, the next.
    mutating func addPending(_ items: [QueuedNotification]) { pending.append(contentsOf: items) }

    /// Records rows about to be written; if the session already stopped they wait for the next connection instead.
    mutating func append(_ items: [QueuedNotification], at instant: ContinuousClock.Instant) -> Bool {
        guard !stopped else {
            pending.append(contentsOf: items)
            return false
        }
        precondition(items.count <= window.freeSpace, "more rows written than the window holds")
        for item in items { window.append(item, identifier: item.wireIdentifier, writtenAt: instant) }
        return true
    }

    /// After a write completed: its notifications wait for an error response from now on.
    mutating func restampLast(_ count: Int, at instant: ContinuousClock.Instant) {
        guard !stopped else { return }
        precondition(count <= window.count, "restamping rows that were never written")
        window.restampLast(count, at: instant)
    }

    /// Settles every row by how the connection ended (the one place the end's meaning is decided): what was
    /// accepted, what failed, what goes to the next connection and at what slow-start limit. Empties the session.
    mutating func end(_ end: End) -> Settlement {
        stopped = true
        let waiting = pending
        pending = []
        switch end {
        case .errorResponse(let response):
            let resolution = window.resolve(response)
            delivered += resolution.accepted.count
            var settlement = Settlement(nextLimit: limit, progressed: true)  // the gateway answered: the connection was fine
            settlement.accepted = resolution.accepted
            settlement.failed = resolution.failed.map { ($0, response) }
            settlement.carry = (resolution.resend + waiting).sorted { $0.messageID < $1.messageID }
            settlement.resent = resolution.resend.count
            return settlement
        case .closed(_, let refused):
            let unsettled = window.removeAllItems()
            var next = limit
            if !refused && !unsettled.isEmpty {
                // Dropped without a word: we cannot know how much arrived. Start small again so a gateway that keeps
                // dropping after a few frames still lets every notification through.
                next = delivered > 0 ? max(1, min(limit, unsettled.count) / 2) : 1
            }
            return Settlement(
                carry: (unsettled + waiting).sorted { $0.messageID < $1.messageID },
                resent: unsettled.count,
                nextLimit: next,
                progressed: delivered > 0
            )
        case .stalled:
            let unsettled = window.removeAllItems()
            return Settlement(
                carry: (unsettled + waiting).sorted { $0.messageID < $1.messageID },
                resent: unsettled.count,
                nextLimit: max(1, min(limit, max(unsettled.count, 1)) / 2),
                progressed: delivered > 0
            )
        case .drained:
            let accepted = window.removeAllItems()
            delivered += accepted.count
            return Settlement(accepted: accepted, carry: waiting, nextLimit: limit, progressed: true)
        }
    }
}
