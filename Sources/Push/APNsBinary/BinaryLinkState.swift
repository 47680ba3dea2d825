import APNs

/// One binary gateway connection's window as a value: what was written and is not yet known accepted, and what each
/// of the connection's ends means for it. The binary interface never acknowledges, so this is where its answers are
/// made: silence for `push_settle` means accepted; an error response settles the whole window (see ``SentWindow``).
/// Events go in (``append(_:)``, ``restampLast(_:at:)``, ``settle(writtenBefore:alarmRaised:)``, ``end(_:verdict:)``)
/// and ``LinkEvent``s come out. ``BinaryLink`` shares it between its writer and reader under a lock. Tested without
/// sockets.
struct BinaryLinkState {
    /// How a connection ended.
    enum End: Sendable, Equatable {
        /// The gateway wrote an error response.
        case errorResponse(BinaryErrorResponse)
        /// The connection ended without one; `refused` when TLS failed (nothing was accepted).
        case closed(String, refused: Bool)
        /// The gateway stopped reading: the connection was closed as dead.
        case stalled(String)
        /// The driver stopped writing, gave the gateway a moment to object, and it did not.
        case drained
    }

    /// Entries being written carry this stamp until their write completes: nothing settles by silence before that.
    static let writing = ContinuousClock.now + .seconds(100 * 365 * 86_400)

    /// Writes under way. While one waits for the socket nothing settles by silence: a gateway that stopped reading
    /// has not accepted what its kernel holds (and the daemon says it stopped reading until a write completes).
    private(set) var writes = 0

    private var window: SentWindow<QueuedNotification>
    /// The reader saw the connection end (or an error response): nothing more settles by time or is written.
    private(set) var stopped = false
    /// The driver closed the connection after its drain (silence so far means accepted).
    private(set) var drained = false
    /// The writer closed the connection because the gateway stopped reading (why).
    private(set) var stall: String?

    init(capacity: Int) { window = SentWindow(capacity: capacity) }

    var oldestWrite: ContinuousClock.Instant? { window.oldestWrite }
    var inFlightCount: Int { window.count }

    mutating func stop() { stopped = true }
    /// The driver's drain (or the writer's stall) counts only while the connection is up: asked after the read ended
    /// on its own (a refused certificate, a drop), it would call accepted what the gateway never took.
    mutating func drain() { if !stopped { drained = true } }
    mutating func stalled(_ reason: String) { if !stopped { stall = reason } }

    /// Records rows about to be written (stamped ``writing``); false if the connection already stopped.
    mutating func append(_ rows: [QueuedNotification]) -> Bool {
        guard !stopped, !drained, stall == nil else { return false }
        precondition(rows.count <= window.freeSpace, "more rows written than the window holds")
        for row in rows { window.append(row, identifier: row.wireIdentifier, writtenAt: Self.writing) }
        writes += 1
        return true
    }

    /// After a write completed: its rows wait for an error response from now on.
    mutating func restampLast(_ count: Int, at instant: ContinuousClock.Instant) {
        writes -= 1
        guard !stopped else { return }
        precondition(count <= window.count, "restamping rows that were never written")
        window.restampLast(count, at: instant)
    }

    /// Removes the rows written before `instant`: accepted by silence. Nothing settles by time while a write waits,
    /// once the gateway has spoken (`alarmRaised`: an error response may be on its way) or the connection stopped.
    mutating func settle(writtenBefore instant: ContinuousClock.Instant, alarmRaised: Bool) -> [QueuedNotification] {
        guard !stopped, !alarmRaised, writes == 0 else { return [] }
        return window.removeSettled(writtenBefore: instant)
    }

    /// How the connection ended, given how its read ended: what the driver and the writer asked for wins, except over
    /// an error response or a refused certificate (the gateway's word: nothing after it, or nothing at all, was taken).
    func end(reading end: End) -> End {
        switch end {
        case .errorResponse, .closed(_, refused: true): return end
        case .closed, .stalled, .drained: break
        }
        if drained { return .drained }
        if let stall { return .stalled(stall) }
        return end
    }

    /// What the end means for every row in the window (the one place it is decided), as the link's last events.
    /// `verdict` classifies the row an error response names. Empties the window.
    mutating func end(_ end: End, verdict: (BinaryErrorResponse, QueuedNotification) -> Verdict) -> [LinkEvent] {
        stopped = true
        switch end {
        case .errorResponse(let response):
            let resolution = window.resolve(response)
            var answers = resolution.accepted.map { Answer($0, .sent) }
            if let failed = resolution.failed { answers.append(Answer(failed, verdict(response, failed))) }
            var events: [LinkEvent] = answers.isEmpty ? [] : [.answered(answers)]
            if !resolution.resend.isEmpty {
                let reason =
                    switch (response.status, resolution.accepted.isEmpty && resolution.failed == nil) {
                    case (.shutdown, _): "the gateway is shutting down; last accepted: \(response.identifier)"
                    case (_, true): "the gateway answered \(response) for a notification no longer in flight"
                    default: "written after the one the gateway refused: it discarded them"
                    }
                events.append(.unanswered(resolution.resend, reason: reason))
            }
            events.append(.closed("the gateway answered \(response)", .orderly))
            return events
        case .closed(let reason, let refused):
            let unsettled = window.removeAllItems()
            let consequence = refused ? "none was accepted" : "they may have arrived: possible duplicates"
            let lost: [LinkEvent] = unsettled.isEmpty ? [] : [.unanswered(unsettled, reason: "\(reason); \(consequence)")]
            return lost + [.closed(reason, refused ? .refused : .dropped)]
        case .stalled(let reason):
            let unsettled = window.removeAllItems()
            let lost: [LinkEvent] =
                unsettled.isEmpty ? [] : [.unanswered(unsettled, reason: "\(reason); they may have arrived: possible duplicates")]
            return lost + [.closed(reason, .stalled)]
        case .drained:
            let accepted = window.removeAllItems().map { Answer($0, .sent) }
            return (accepted.isEmpty ? [] : [.answered(accepted)]) + [.closed("closed after its last answers", .orderly)]
        }
    }
}
