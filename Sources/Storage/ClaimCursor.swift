/// Where the next claim's index scan starts: just past the newest row claimed while claims come back full (a
/// backlog is draining), so a claim does not walk again past every row already claimed and sent. Those rows leave
/// dead index entries behind, and while any session holds an old snapshot open (an operator's psql in a
/// REPEATABLE READ transaction) they can be neither vacuumed nor skipped: each claim from the start of the queue
/// visited all of them again and the drain slowed down round after round.
///
/// Rows behind the cursor that become claimable again (given back, a lease run out, a transaction that committed
/// after later ones) are found by a claim from the start: after a claim came back short (the end of the queue was
/// reached), after rows were given back, and at least every `rescan`.
package struct ClaimCursor: Sendable, Equatable {
    /// Claims start after this message id; 0 is the start of the queue.
    package private(set) var after: Int64 = 0
    /// When the last claim from the start began.
    private var lastFromStart: ContinuousClock.Instant?
    package let rescan: Duration

    package init(rescan: Duration = .seconds(1)) { self.rescan = rescan }

    /// Where a claim beginning `now` starts.
    package mutating func start(now: ContinuousClock.Instant) -> Int64 {
        if after > 0, let last = lastFromStart, last.duration(to: now) < rescan { return after }
        lastFromStart = now
        return 0
    }

    /// A claim of `limit` rows returned `count`, the newest being `newest`: a full claim moves the cursor past it
    /// (never back: claims may overlap), a short one sends the next claim to the start.
    package mutating func claimed(count: Int, limit: Int, newest: Int64?) {
        if count >= limit, let newest {
            after = max(after, newest)
        } else {
            after = 0
        }
    }

    /// Rows were given back (or returned from an expired lease): the next claim starts from the start.
    package mutating func rewind() { after = 0 }
}
