/// Where the next claim's index scan starts: just past the newest row claimed while claims come back full (a
/// backlog is draining), so a claim does not walk again past every row already claimed and sent. Those rows leave
/// dead index entries behind, and while any session holds an old snapshot open (an operator's psql in a
/// REPEATABLE READ transaction) they can be neither vacuumed nor skipped: each claim from the start of the queue
/// visited all of them again and the drain slowed down round after round.
///
/// Rows behind the cursor that become claimable again (given back, a lease run out, a transaction that committed
/// after later ones) are found by a claim from the start: after a claim came back short (the end of the queue was
/// reached), after rows were given back, and at least every `rescan`. While the daemon listens, each of those says
/// where it is (the NOTIFY of an insert or of rows given back carries their lowest message id: ``rewind(below:)``),
/// so the claim from the start is only a safety net, every ``listeningRescan``: with a snapshot held, each claim from
/// the start walked every row claimed since, and that was the whole cost of the snapshot (docs/BENCHMARKS.md, issue 43).
package struct ClaimCursor: Sendable, Equatable {
    /// Claims start after this message id; 0 is the start of the queue.
    package private(set) var after: Int64 = 0
    /// When the last claim from the start began.
    private var lastFromStart: ContinuousClock.Instant?
    /// A rewind no claim has started from yet: a claim that was already under way when it came must not move the
    /// cursor past it when it ends.
    private var floor: Int64?
    package let rescan: Duration

    /// How often a claim starts from the start while NOTIFYs say where rows appear behind the cursor.
    package static let listeningRescan: Duration = .seconds(60)

    package init(rescan: Duration = .seconds(1)) { self.rescan = rescan }

    /// Where a claim beginning `now` starts; `listening`: the NOTIFYs rewind the cursor (``rewind(below:)``).
    package mutating func start(now: ContinuousClock.Instant, listening: Bool = false) -> Int64 {
        let period = listening ? max(rescan, Self.listeningRescan) : rescan
        // This claim starts at or before any rewind so far (``claimed`` keeps the cursor there).
        floor = nil
        if after > 0, let last = lastFromStart, last.duration(to: now) < period { return after }
        lastFromStart = now
        return 0
    }

    /// Rows from message id `id` on became claimable (queued by a transaction that committed late, given back, or
    /// returned from an expired lease): the next claim starts before them.
    package mutating func rewind(below id: Int64) {
        let point = max(0, id - 1)
        after = min(after, point)
        floor = min(floor ?? point, point)
    }

    /// A claim of `limit` rows returned `count`, the newest being `newest`: a full claim moves the cursor past it
    /// (never back: claims may overlap), a short one sends the next claim to the start.
    package mutating func claimed(count: Int, limit: Int, newest: Int64?) {
        if count >= limit, let newest {
            after = max(after, newest)
        } else {
            after = 0
        }
        if let floor { after = min(after, floor) }
    }

    /// Rows were given back (or returned from an expired lease): the next claim starts from the start.
    package mutating func rewind() { rewind(below: 0) }
}
