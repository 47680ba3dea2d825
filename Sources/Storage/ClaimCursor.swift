/// Where the next claim's index scan starts: just past the newest row claimed while claims come back full (a
/// backlog is draining), or after any claim while the daemon listens (below), so a claim does not walk again past every
/// row already claimed and sent. Those rows leave dead index entries behind, and while any session holds an old
/// snapshot open (an operator's psql in a REPEATABLE READ transaction) they can be neither vacuumed nor skipped: each
/// claim from the start of the queue visited all of them again and the drain slowed down round after round.
///
/// Rows behind the cursor that become claimable again (given back, a lease run out, a transaction that committed
/// after later ones) are found by a claim from the start: without a listener, after a claim came back short (the end
/// of the queue was reached), after rows were given back, and at least every `rescan`. While the daemon listens, each
/// of those says where it is (the NOTIFY of an insert or of rows given back carries their lowest message id:
/// ``rewind(below:)``), so even a short claim moves the cursor past what it claimed, and claims never go back to the
/// start on their own. The safety net for a row nothing announced (one an operator's statement held locked as a claim
/// passed it) is a probe off the claims' path, every ``listeningRescan``: ``PushQueue/probeBehindCursors()`` looks for
/// a claimable row behind each cursor and rewinds it there. A claim from the start walked every row claimed since the
/// oldest snapshot open: with one held, that was the whole cost of the snapshot (docs/BENCHMARKS.md, issue 43), and
/// chat's once-a-minute claim from the start during a broadcast took 0.7 s, its slowest message (issue 43, item 5).
package struct ClaimCursor: Sendable, Equatable {
    /// One claim under way: where it started, and whether the daemon listened when it began (NOTIFYs then say where
    /// rows appear behind the cursor).
    package struct Claim: Sendable, Equatable {
        package let after: Int64
        let id: Int
        let listening: Bool
    }

    /// Claims start after this message id; 0 is the start of the queue.
    package private(set) var after: Int64 = 0
    /// When the last claim from the start began.
    private var lastFromStart: ContinuousClock.Instant?
    /// The claims under way (several connections share a cursor), each with the lowest rewind since it began: a claim
    /// under way when a rewind came read the queue before the rows it announces, and must not move the cursor past
    /// them when it ends, whichever claims began or ended meanwhile.
    private var underWay: [Int: Int64] = [:]
    private var nextID = 0
    /// How many claims began and have not ended.
    package var claimsUnderWay: Int { underWay.count }
    package let rescan: Duration

    /// How often the daemon looks for claimable rows behind its cursors while NOTIFYs say where rows appear
    /// (``PushQueue/probeBehindCursors()``): the safety net for a row nothing announced.
    package static let listeningRescan: Duration = .seconds(60)

    package init(rescan: Duration = .seconds(1)) { self.rescan = rescan }

    /// A claim beginning `now`, and where it starts; `listening`: the NOTIFYs rewind the cursor (``rewind(below:)``).
    /// Each claim begun ends with ``claimed(_:count:limit:newest:)`` or ``abandoned(_:)``.
    package mutating func begin(now: ContinuousClock.Instant, listening: Bool = false) -> Claim {
        var from: Int64 = 0
        if after > 0, listening || (lastFromStart.map { $0.duration(to: now) < rescan } ?? false) {
            from = after
        } else {
            lastFromStart = now
        }
        nextID &+= 1
        underWay[nextID] = Int64.max
        return Claim(after: from, id: nextID, listening: listening)
    }

    /// Rows from message id `id` on became claimable (queued by a transaction that committed late, given back, or
    /// returned from an expired lease): the next claim starts before them, and no claim under way moves past them.
    package mutating func rewind(below id: Int64) {
        let point = max(0, id - 1)
        after = min(after, point)
        for (claim, floor) in underWay where point < floor { underWay[claim] = point }
    }

    /// `claim` of `limit` rows returned `count`, the newest being `newest`: a full claim moves the cursor past it
    /// (never back: claims may overlap). A short one (the end of the queue) sends the next claim to the start, unless
    /// the claim began while listening: then the NOTIFYs say where rows appear behind it, as in a backlog, and the
    /// cursor moves past what it claimed too. Chat's claims are short: from the start, each walked every chat row in
    /// flight and every one sent since the oldest snapshot open (a broadcast's statements hold one for 0.1–1 s), and a
    /// chat claim during a broadcast took 50–100 ms instead of a few (docs/BENCHMARKS.md, issue 43, item 5).
    package mutating func claimed(_ claim: Claim, count: Int, limit: Int, newest: Int64?) {
        let floor = underWay.removeValue(forKey: claim.id) ?? Int64.max
        if count >= limit || claim.listening {
            if let newest { after = max(after, newest) }
        } else {
            after = 0
        }
        after = min(after, floor)
    }

    /// `claim` failed (the database away): it moves nothing.
    package mutating func abandoned(_ claim: Claim) {
        underWay.removeValue(forKey: claim.id)
    }

    /// Rows were given back (or returned from an expired lease): the next claim starts from the start.
    package mutating func rewind() { rewind(below: 0) }
}
