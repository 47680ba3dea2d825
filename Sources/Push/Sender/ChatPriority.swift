import Support

/// Chat first (issue 43, item 5): the pace a broadcast may take while chat waits on the same machine. Chat's own rows
/// are never held back; what slows them while a broadcast drains at full speed is the machine and PostgreSQL, saturated
/// by the broadcast's claims, writes and moves. So the daemon watches its interactive lane's claims (the statement and
/// its commit: how long PostgreSQL and this process take for a chat row before it can be written), a ``step`` at a
/// time: while their median takes longer than `target`, the broadcast's pace is cut by a quarter (never below `floor`
/// rows/s); while it does not, the pace grows back by a tenth per step. The broadcast settles at the pace that keeps
/// chat's claims within the target; a second without chat lifts the limit. A value type, tested apart from the
/// daemon; ``BroadcastRate`` applies it to the broadcast's claims.
struct ChatPriority: Sendable {
    /// The median time of an interactive claim above which the broadcast yields.
    let target: Duration
    /// The slowest pace a broadcast is held to, rows/s: it always progresses.
    let floor: Double
    /// The broadcast's pace now, rows/s (nil: none).
    private(set) var limit: Double?
    /// The broadcast's pace lately, rows/s (granted rows, averaged over steps): where a first cut starts from.
    private(set) var observed: Double = 0
    private var granting: (start: ContinuousClock.Instant, rows: Int)
    /// This step's interactive claims.
    private var claims: (start: ContinuousClock.Instant, durations: [Duration])
    private var lastChat: ContinuousClock.Instant?

    /// The floor the daemon uses: a million rows still drain within the quarter hour.
    static let defaultFloor: Double = 1_000
    /// How often the pace changes, judged on the median of the step's claims.
    static let step: Duration = .milliseconds(200)
    /// Without an interactive claim for this long, the broadcast goes at full pace again.
    static let idle: Duration = .seconds(1)

    init(target: Duration, floor: Double, now: ContinuousClock.Instant) {
        precondition(target > .zero && floor > 0)
        self.target = target
        self.floor = floor
        granting = (now, 0)
        claims = (now, [])
    }

    /// An interactive claim that returned rows took `duration`.
    mutating func chatClaimed(taking duration: Duration, now: ContinuousClock.Instant) {
        lastChat = now
        claims.durations.append(duration)
        guard now - claims.start >= Self.step else { return }
        let median = claims.durations.sorted()[claims.durations.count / 2]
        claims = (now, [])
        if median > target {
            limit = max(floor, (limit ?? max(observed, floor)) * 0.75)
        } else if let current = limit {
            // Grown past twice what the broadcast took lately: it is not what holds the broadcast back.
            let grown = current * 1.1
            limit = grown > max(observed, floor) * 2 ? nil : grown
        }
    }

    /// The broadcast's pace now, rows/s (nil: none): lifted once chat has been quiet for ``idle``.
    mutating func pace(now: ContinuousClock.Instant) -> Double? {
        if limit != nil, let lastChat, now - lastChat >= Self.idle { limit = nil }
        return limit
    }

    /// `rows` broadcast rows were granted (negative: given back unused).
    mutating func granted(_ rows: Int, now: ContinuousClock.Instant) {
        let elapsed = now - granting.start
        if elapsed >= Self.step {
            let pace = Double(max(0, granting.rows)) / elapsed.seconds
            observed = observed == 0 ? pace : (observed + pace) / 2
            granting = (now, 0)
        }
        granting.rows += rows
    }
}
